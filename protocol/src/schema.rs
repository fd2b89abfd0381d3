//! The schemas in `schemas/`, embedded at build time, and validation against them.
