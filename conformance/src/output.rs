//! Renders a [`crate::model::SuiteReport`]: terminal table, JSON, JUnit XML, Markdown.
