//! Unit tests of offering choice and the price guard.
