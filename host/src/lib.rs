//! The reference host: the host side of the open-design profile contract, implemented once.
