//! Unit tests of the GPU rules, one stack text per rule.
