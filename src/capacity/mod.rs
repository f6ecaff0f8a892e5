//! Capacity: where GPUs can be had, what they cost, and what a stack holds.
//! `find` answers "where can I get N GPUs for H hours, and at what price": it searches
//! Capacity Block and training-plan offerings, Spot and On-Demand in several regions at
//! once (`search`), ranks the options by US dollars per GPU-hour (`find`) and prints the
//! chosen row as a stack block (`emit`). Nothing here buys anything.
//! `timeline` builds the model of a stack's reservations (state + a live read, priced) that
//! `gpustack capacity timeline` draws (as text, or as SVG through `svg`) and `gpustack
//! status` summarises.

pub mod emit;
pub mod find;
pub mod search;
pub mod svg;
pub mod timeline;
