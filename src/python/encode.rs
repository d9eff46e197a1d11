//! The write half of `rocketstore_spark._native`: record encoding and patching, Java string hashes, index keys,
//! consume-queue units.
//!
//! Each function views its buffers, releases the GIL and runs one kernel. Rows a kernel cannot handle come back
//! as `(problem, row)` codes (see [`ENCODE_OK`] …), so that Python raises its own errors naming the row.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::buffers::View;
use crate::encode::{self, EncodeError, RecordColumns, Strings};
use crate::index::{self, IndexError};
use crate::java_hash::{self, HashError};
use crate::properties::{self, PairColumn, PropertiesError};
use crate::queue_units::{self, UnitsError};
use crate::record_patch::{self, PatchError};

/// Every row was encoded (or hashed).
const ENCODE_OK: i64 = 0;
/// A row's offsets lie outside its column's data.
const ENCODE_BAD_OFFSETS: i64 = 1;
/// A row does not fit a record (topic, properties or the whole record too long for its length field).
const ENCODE_TOO_LONG: i64 = 2;

/// An index file's header is damaged (indexCount negative or beyond the file's entries).
const INDEX_BAD_HEADER: i64 = 3;
/// A key's hash is not an `indexKeyHashMethod` value.
const INDEX_BAD_HASH: i64 = 4;
/// A key's record row lies outside its part's columns.
const INDEX_BAD_ROW: i64 = 5;

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

/// java_string_hash(text, seed=0) -> int: the hash of one UTF-8 string (`bytes`), continued from `seed`.
#[pyfunction]
#[pyo3(signature = (text, seed=0))]
fn java_string_hash(py: Python<'_>, text: &[u8], seed: i32) -> i32 {
    py.detach(|| java_hash::java_hash(seed, text))
}

/// A part of keys as Python passes it: `(hashes, rows or None, phy_offsets, store_timestamps)`.
type KeyPartArgs<'py> = (
    Bound<'py, PyAny>,
    Option<Bound<'py, PyAny>>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
);

/// put_index_keys(file, slots, max_entries, parts) -> (problem, keys put or key)
///
/// `file`: the index file's writable bytes (its memory map); `parts`: a list of `(hashes, rows, phy_offsets,
/// store_timestamps)`, the keys in order: `hashes` int32, one per key; `rows` int32 (one per key, the row of its
/// record in the part's columns) or None (key k is record k); `phy_offsets`, `store_timestamps`: int64, one per
/// record. Keys are put in order while the file has room; the header is updated in `file`.
#[pyfunction]
fn put_index_keys(
    py: Python<'_>,
    file: &Bound<'_, PyAny>,
    slots: usize,
    max_entries: usize,
    parts: Vec<KeyPartArgs<'_>>,
) -> PyResult<(i64, i64)> {
    type PartViews = (View<i32>, Option<View<i32>>, View<i64>, View<i64>);
    let mut views: Vec<PartViews> = Vec::with_capacity(parts.len());
    let mut spans = Vec::new();
    for (hashes, rows, phy, ts) in &parts {
        let part = (
            View::<i32>::read(hashes)?,
            rows.as_ref().map(View::<i32>::read).transpose()?,
            View::<i64>::read(phy)?,
            View::<i64>::read(ts)?,
        );
        spans.extend([part.0.span(), part.2.span(), part.3.span()]);
        spans.extend(part.1.as_ref().map(View::span));
        views.push(part);
    }
    let mut file = View::<u8>::write(file, &spans)?;
    let keys: Vec<index::KeyPart> = views
        .iter()
        .map(|(hashes, rows, phy, ts)| index::KeyPart {
            hashes: hashes.slice(),
            rows: rows.as_ref().map(View::slice),
            phy_offsets: phy.slice(),
            store_timestamps: ts.slice(),
        })
        .collect();
    let bytes = file.slice_mut();
    match py.detach(|| index::put_keys(bytes, slots, max_entries, &keys)) {
        Ok(put) => Ok((ENCODE_OK, put as i64)),
        Err(IndexError::BadHeader) => Ok((INDEX_BAD_HEADER, -1)),
        Err(IndexError::BadHash(key)) => Ok((INDEX_BAD_HASH, key as i64)),
        Err(IndexError::BadRow(key)) => Ok((INDEX_BAD_ROW, key as i64)),
        Err(IndexError::Shape) => Err(PyValueError::new_err(
            "put_index_keys: a part's columns differ in length or the file's size does not match its slots and \
             entries",
        )),
    }
}

/// consume_queue_units(rows, phy_offsets, sizes, tags_codes, out) -> (problem, row)
///
/// `rows`: int64, the records whose units are written, in order; `phy_offsets`, `sizes`, `tags_codes`: int64, one
/// per record; `out`: uint8, 20 bytes per row of `rows`.
#[pyfunction]
fn consume_queue_units(
    py: Python<'_>,
    rows: &Bound<'_, PyAny>,
    phy_offsets: &Bound<'_, PyAny>,
    sizes: &Bound<'_, PyAny>,
    tags_codes: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    let rows = View::<i64>::read(rows)?;
    let phy = View::<i64>::read(phy_offsets)?;
    let sizes = View::<i64>::read(sizes)?;
    let tags = View::<i64>::read(tags_codes)?;
    let inputs = [rows.span(), phy.span(), sizes.span(), tags.span()];
    let mut out = View::<u8>::write(out, &inputs)?;
    let (r, p, s, t, bytes) = (
        rows.slice(),
        phy.slice(),
        sizes.slice(),
        tags.slice(),
        out.slice_mut(),
    );
    match py.detach(|| queue_units::put_units(r, p, s, t, bytes)) {
        Ok(()) => Ok((ENCODE_OK, -1)),
        Err(UnitsError::Row(k)) => Ok((ENCODE_BAD_OFFSETS, k as i64)),
        Err(UnitsError::Shape) => Err(PyValueError::new_err(
            "consume_queue_units: the record columns differ in length or the output is not 20 bytes a row",
        )),
    }
}

/// patch_records(buf, starts, queue_offsets, phy_offsets, ts_positions, store_timestamps) -> (problem, row)
///
/// `buf`: uint8, the records' bytes (a scratch buffer or a staged file's map); `starts`: int64, where each record
/// begins in `buf`; the others int64, one per record (`phy_offsets` empty: left as encoded).
#[pyfunction]
fn patch_records(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    starts: &Bound<'_, PyAny>,
    queue_offsets: &Bound<'_, PyAny>,
    phy_offsets: &Bound<'_, PyAny>,
    ts_positions: &Bound<'_, PyAny>,
    store_timestamps: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    let starts = View::<i64>::read(starts)?;
    let queue = View::<i64>::read(queue_offsets)?;
    let phy = View::<i64>::read(phy_offsets)?;
    let ts_pos = View::<i64>::read(ts_positions)?;
    let ts = View::<i64>::read(store_timestamps)?;
    let inputs = [
        starts.span(),
        queue.span(),
        phy.span(),
        ts_pos.span(),
        ts.span(),
    ];
    let mut buf = View::<u8>::write(buf, &inputs)?;
    let (s, q, p, tp, t, bytes) = (
        starts.slice(),
        queue.slice(),
        phy.slice(),
        ts_pos.slice(),
        ts.slice(),
        buf.slice_mut(),
    );
    match py.detach(|| record_patch::patch_records(bytes, s, q, p, tp, t)) {
        Ok(()) => Ok((ENCODE_OK, -1)),
        Err(PatchError::Row(k)) => Ok((ENCODE_BAD_OFFSETS, k as i64)),
        Err(PatchError::Shape) => Err(PyValueError::new_err(
            "patch_records: the record columns differ in length",
        )),
    }
}

/// The views of `serialize_properties`' inputs: the optional prefix, then each pair column's name, values and
/// presence mask.
struct PropertyViews {
    prefix: Option<StringViews>,
    names: Vec<Vec<u8>>,
    values: Vec<StringViews>,
    present: Vec<View<u8>>,
}

impl PropertyViews {
    fn read(prefix: &Bound<'_, PyAny>, pairs: &Bound<'_, PyAny>) -> PyResult<Self> {
        let prefix = if prefix.is_none() {
            None
        } else {
            Some(StringViews::read(prefix)?)
        };
        let pairs: Vec<(Vec<u8>, Bound<'_, PyAny>, Bound<'_, PyAny>)> = pairs.extract()?;
        let mut views = Self {
            prefix,
            names: Vec::new(),
            values: Vec::new(),
            present: Vec::new(),
        };
        for (name, values, present) in &pairs {
            views.names.push(name.clone());
            views.values.push(StringViews::read(values)?);
            views.present.push(View::read(present)?);
        }
        Ok(views)
    }

    fn spans(&self) -> Vec<(usize, usize)> {
        let mut spans: Vec<(usize, usize)> =
            self.prefix.iter().flat_map(StringViews::spans).collect();
        for (values, present) in self.values.iter().zip(&self.present) {
            spans.extend(values.spans());
            spans.push(present.span());
        }
        spans
    }

    fn columns(&self) -> (Option<crate::encode::Strings<'_>>, Vec<PairColumn<'_>>) {
        let pairs = self
            .names
            .iter()
            .zip(&self.values)
            .zip(&self.present)
            .map(|((name, values), present)| PairColumn {
                name,
                values: values.strings(),
                present: present.slice(),
            })
            .collect();
        (self.prefix.as_ref().map(StringViews::strings), pairs)
    }
}

/// A properties kernel's result as Python sees it: `(problem, row)`, or ValueError for buffers of the wrong shape.
fn properties_result(result: Result<(), PropertiesError>, what: &str) -> PyResult<(i64, i64)> {
    match result {
        Ok(()) => Ok((ENCODE_OK, -1)),
        Err(PropertiesError::Offsets(row)) => Ok((ENCODE_BAD_OFFSETS, row as i64)),
        Err(PropertiesError::TooLong(row)) => Ok((ENCODE_TOO_LONG, row as i64)),
        Err(PropertiesError::Shape) => Err(PyValueError::new_err(format!(
            "{what}: the columns, presence masks or the output do not match the rows"
        ))),
    }
}

/// property_offsets(rows, prefix, pairs, out) -> (problem, row)
///
/// `prefix`: None or (int32 offsets, uint8 data), each row's serialised pairs so far; `pairs`: a list of
/// (name bytes, (int32 offsets, uint8 data), uint8 presence: 1 per row, or empty when every row has a value);
/// `out`: int32, rows + 1 offsets of the serialised texts.
#[pyfunction]
fn property_offsets(
    py: Python<'_>,
    rows: usize,
    prefix: &Bound<'_, PyAny>,
    pairs: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    let views = PropertyViews::read(prefix, pairs)?;
    let mut out = View::<i32>::write(out, &views.spans())?;
    let (prefix, columns) = views.columns();
    let offsets = out.slice_mut();
    properties_result(
        py.detach(|| properties::serialized_offsets(rows, prefix, &columns, offsets)),
        "property_offsets",
    )
}

/// serialize_properties(rows, prefix, pairs, offsets, out) -> (problem, row)
///
/// The inputs as for `property_offsets`; `offsets`: its int32 output; `out`: uint8, the texts' total length.
#[pyfunction]
fn serialize_properties(
    py: Python<'_>,
    rows: usize,
    prefix: &Bound<'_, PyAny>,
    pairs: &Bound<'_, PyAny>,
    offsets: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    let views = PropertyViews::read(prefix, pairs)?;
    let offsets = View::<i32>::read(offsets)?;
    let mut inputs = views.spans();
    inputs.push(offsets.span());
    let mut out = View::<u8>::write(out, &inputs)?;
    let (prefix, columns) = views.columns();
    let (offsets, bytes) = (offsets.slice(), out.slice_mut());
    properties_result(
        py.detach(|| properties::serialize(rows, prefix, &columns, offsets, bytes)),
        "serialize_properties",
    )
}

/// Adds the write half's functions and constants to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(record_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(encode_records, m)?)?;
    m.add_function(wrap_pyfunction!(java_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(java_string_hash, m)?)?;
    m.add_function(wrap_pyfunction!(put_index_keys, m)?)?;
    m.add_function(wrap_pyfunction!(consume_queue_units, m)?)?;
    m.add_function(wrap_pyfunction!(patch_records, m)?)?;
    m.add_function(wrap_pyfunction!(property_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(serialize_properties, m)?)?;
    m.add("INDEX_BAD_HEADER", INDEX_BAD_HEADER)?;
    m.add("INDEX_BAD_HASH", INDEX_BAD_HASH)?;
    m.add("INDEX_BAD_ROW", INDEX_BAD_ROW)?;
    m.add("ENCODE_OK", ENCODE_OK)?;
    m.add("ENCODE_BAD_OFFSETS", ENCODE_BAD_OFFSETS)?;
    m.add("ENCODE_TOO_LONG", ENCODE_TOO_LONG)?;
    m.add("ENCODE_INT_COLUMNS", INT_COLUMNS.to_vec())?;
    m.add("HOST_ADDRESS_WIDTH", encode::HOST_ADDRESS_WIDTH)?;
    Ok(())
}
