//! Who made a device: the table lives in `trace-format`, shared with the
//! trace decoder (which names a traced call's device the way the log does).

pub use trace_format::vendor::vendor;
