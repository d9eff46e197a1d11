//! The write half of `rocketstore_spark._native`: record encoding and Java string hashes.
//!
//! Each function views its buffers, releases the GIL and runs one kernel. Rows a kernel cannot handle come back
//! as `(problem, row)` codes (see [`ENCODE_OK`] …), so that Python raises its own errors naming the row.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::buffers::View;
use crate::encode::{self, EncodeError, RecordColumns, Strings};
use crate::java_hash::{self, HashError};

/// Every row was encoded (or hashed).
const ENCODE_OK: i64 = 0;
/// A row's offsets lie outside its column's data.
const ENCODE_BAD_OFFSETS: i64 = 1;
/// A row does not fit a record (topic, properties or the whole record too long for its length field).
const ENCODE_TOO_LONG: i64 = 2;

/// The fixed columns, in the order Python passes them.
const INT_COLUMNS: [&str; 11] = [
    "queue_id",
    "flag",
    "queue_offset",
    "phy_offset",
    "sysflag",
    "born_timestamp",
    "born_port",
    "store_timestamp",
    "store_port",
    "reconsume_times",
    "prepared_offset",
];

/// Views of a string column's offsets (int32) and data (uint8).
struct StringViews(View<i32>, View<u8>);

impl StringViews {
    fn read(column: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (offsets, data): (Bound<'_, PyAny>, Bound<'_, PyAny>) = column.extract()?;
        Ok(Self(View::read(&offsets)?, View::read(&data)?))
    }

    fn strings(&self) -> Strings<'_> {
        Strings {
            offsets: self.0.slice(),
            data: self.1.slice(),
        }
    }

    fn spans(&self) -> [(usize, usize); 2] {
        [self.0.span(), self.1.span()]
    }
}

/// Views of every input of the record encoder.
struct RecordViews {
    topic: StringViews,
    body: StringViews,
    properties: StringViews,
    ints: Vec<View<i64>>,
    born_addr: View<u8>,
    store_addr: View<u8>,
}

impl RecordViews {
    fn read(
        topic: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
        properties: &Bound<'_, PyAny>,
        ints: &Bound<'_, PyAny>,
        born_addr: &Bound<'_, PyAny>,
        store_addr: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let ints: Vec<Bound<'_, PyAny>> = ints.extract()?;
        if ints.len() != INT_COLUMNS.len() {
            return Err(PyValueError::new_err(format!(
                "expected the int64 columns {INT_COLUMNS:?}, found {} arrays",
                ints.len()
            )));
        }
        Ok(Self {
            topic: StringViews::read(topic)?,
            body: StringViews::read(body)?,
            properties: StringViews::read(properties)?,
            ints: ints.iter().map(View::read).collect::<PyResult<_>>()?,
            born_addr: View::read(born_addr)?,
            store_addr: View::read(store_addr)?,
        })
    }

    fn spans(&self) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        for s in [&self.topic, &self.body, &self.properties] {
            spans.extend(s.spans());
        }
        spans.extend(self.ints.iter().map(View::span));
        spans.extend([self.born_addr.span(), self.store_addr.span()]);
        spans
    }

    fn columns(&self) -> RecordColumns<'_> {
        let int = |k: usize| self.ints[k].slice();
        RecordColumns {
            topic: self.topic.strings(),
            body: self.body.strings(),
            properties: self.properties.strings(),
            queue_id: int(0),
            flag: int(1),
            queue_offset: int(2),
            phy_offset: int(3),
            sysflag: int(4),
            born_timestamp: int(5),
            born_port: int(6),
            store_timestamp: int(7),
            store_port: int(8),
            reconsume_times: int(9),
            prepared_offset: int(10),
            born_addr: self.born_addr.slice(),
            store_addr: self.store_addr.slice(),
        }
    }
}

/// An encoder result as Python sees it: `(problem, row)`, or ValueError for buffers of the wrong shape.
fn encode_result(result: Result<(), EncodeError>, what: &str) -> PyResult<(i64, i64)> {
    match result {
        Ok(()) => Ok((ENCODE_OK, -1)),
        Err(EncodeError::Offsets(row)) => Ok((ENCODE_BAD_OFFSETS, row as i64)),
        Err(EncodeError::TooLong(row)) => Ok((ENCODE_TOO_LONG, row as i64)),
        Err(EncodeError::Shape) => Err(PyValueError::new_err(format!(
            "{what}: the columns' lengths or the output buffer do not match the rows"
        ))),
    }
}

/// record_sizes(topic, body, properties, ints, born_addr, store_addr, out) -> (problem, row)
///
/// `topic`, `body`, `properties`: (int32 offsets, uint8 data) pairs; `ints`: the 11 int64 columns of
/// `INT_COLUMNS`; `born_addr`, `store_addr`: uint8, 16 bytes a row; `out`: int64, one size per row.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn record_sizes(
    py: Python<'_>,
    topic: &Bound<'_, PyAny>,
    body: &Bound<'_, PyAny>,
    properties: &Bound<'_, PyAny>,
    ints: &Bound<'_, PyAny>,
    born_addr: &Bound<'_, PyAny>,
    store_addr: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    let views = RecordViews::read(topic, body, properties, ints, born_addr, store_addr)?;
    let mut out = View::<i64>::write(out, &views.spans())?;
    let cols = views.columns();
    let sizes = out.slice_mut();
    encode_result(
        py.detach(|| encode::record_sizes(&cols, sizes)),
        "record_sizes",
    )
}

/// encode_records(topic, body, properties, ints, born_addr, store_addr, out) -> (problem, row)
///
/// The inputs as for `record_sizes`; `out`: uint8, exactly the sum of the records' sizes.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn encode_records(
    py: Python<'_>,
    topic: &Bound<'_, PyAny>,
    body: &Bound<'_, PyAny>,
    properties: &Bound<'_, PyAny>,
    ints: &Bound<'_, PyAny>,
    born_addr: &Bound<'_, PyAny>,
    store_addr: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    let views = RecordViews::read(topic, body, properties, ints, born_addr, store_addr)?;
    let mut out = View::<u8>::write(out, &views.spans())?;
    let cols = views.columns();
    let bytes = out.slice_mut();
    encode_result(
        py.detach(|| encode::encode_records(&cols, bytes)),
        "encode_records",
    )
}

/// java_hashes(strings, seeds, out) -> (problem, row)
///
/// `strings`: (int32 offsets, uint8 UTF-8 data); `seeds`: int32, one per string or empty (seed 0): the hash of a
/// prefix each string continues; `out`: int32, one per string.
#[pyfunction]
fn java_hashes(
    py: Python<'_>,
    strings: &Bound<'_, PyAny>,
    seeds: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    let strings = StringViews::read(strings)?;
    let seeds = View::<i32>::read(seeds)?;
    let mut inputs = strings.spans().to_vec();
    inputs.push(seeds.span());
    let mut out = View::<i32>::write(out, &inputs)?;
    let (text, seeds, hashes) = (strings.strings(), seeds.slice(), out.slice_mut());
    match py.detach(|| java_hash::java_hashes(text, seeds, hashes)) {
        Ok(()) => Ok((ENCODE_OK, -1)),
        Err(HashError::Offsets(row)) => Ok((ENCODE_BAD_OFFSETS, row as i64)),
        Err(HashError::Shape) => Err(PyValueError::new_err(
            "java_hashes: the seeds or the output do not match the strings",
        )),
    }
}

/// Adds the write half's functions and constants to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(record_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(encode_records, m)?)?;
    m.add_function(wrap_pyfunction!(java_hashes, m)?)?;
    m.add("ENCODE_OK", ENCODE_OK)?;
    m.add("ENCODE_BAD_OFFSETS", ENCODE_BAD_OFFSETS)?;
    m.add("ENCODE_TOO_LONG", ENCODE_TOO_LONG)?;
    m.add("ENCODE_INT_COLUMNS", INT_COLUMNS.to_vec())?;
    m.add("HOST_ADDRESS_WIDTH", encode::HOST_ADDRESS_WIDTH)?;
    Ok(())
}
