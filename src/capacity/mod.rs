//! Capacity: where reserved GPU capacity is and how it is used. `timeline` builds the model
//! of a stack's reservations (state + a live read, priced) that `gpustack capacity timeline`
//! draws (as text, or as SVG through `svg`) and `gpustack status` summarises.

pub mod svg;
pub mod timeline;
