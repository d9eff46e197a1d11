//! The native core of rocketstore-spark: hot loops of the store layer over byte slices.
//!
//! Every kernel is a plain Rust function over input and output slices, so that another front end (a C ABI or a
//! JVM binding) can call the same code. The Python binding (feature `python`, module
//! `rocketstore_spark._native`) is a thin layer that views Python buffers, releases the GIL, and calls them.

pub mod columns;
pub mod consume_queue;
pub mod decode;
pub mod encode;
pub mod file_ranges;
pub mod header;
pub mod index;
pub mod java_hash;
pub mod layout;
pub mod properties;
pub mod queue_test;
pub mod queue_units;
pub mod record_chain;
pub mod record_crc;
pub mod record_patch;

#[cfg(feature = "python")]
mod python;
