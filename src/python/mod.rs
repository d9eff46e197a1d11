//! The Python module `rocketstore_spark._native`: each function views its buffers, releases the GIL, runs one
//! kernel, and hands back what Python turns into arrays and errors.

mod buffers;
mod encode;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use crate::{columns, consume_queue, header, record_chain};
use buffers::View;

/// A list of positions as the bytes of native-endian int64s (numpy wraps them without a copy).
fn positions_bytearray<'py>(
    py: Python<'py>,
    positions: &[i64],
) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_with(py, positions.len() * 8, |bytes: &mut [u8]| {
        for (cell, p) in bytes.chunks_exact_mut(8).zip(positions) {
            cell.copy_from_slice(&p.to_ne_bytes());
        }
        Ok(())
    })
}

/// chain_record_starts(buf, start, stop) -> (positions as int64 bytes, end, kind code)
#[pyfunction]
fn chain_record_starts<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: i64,
    stop: i64,
) -> PyResult<(Bound<'py, PyByteArray>, i64, u8)> {
    let view = View::<u8>::read(buf)?;
    let bytes = view.slice();
    let (positions, end, kind) = py.detach(|| {
        let mut out = Vec::new();
        let (end, kind) = record_chain::chain_record_starts(bytes, start, stop, &mut out);
        (out, end, kind)
    });
    Ok((positions_bytearray(py, &positions)?, end, kind as u8))
}

/// magic_candidates(buf, start, stop) -> positions as int64 bytes
#[pyfunction]
fn magic_candidates<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: i64,
    stop: i64,
) -> PyResult<Bound<'py, PyByteArray>> {
    let view = View::<u8>::read(buf)?;
    let bytes = view.slice();
    let positions = py.detach(|| {
        let mut out = Vec::new();
        record_chain::magic_candidates(bytes, start, stop, &mut out);
        out
    });
    positions_bytearray(py, &positions)
}

/// parse_records(buf, positions, columns, problems) -> number of records that failed a check
///
/// `columns`: a C-contiguous int64 array of HEADER_COLUMNS × len(positions); `problems`: int8 of len(positions).
#[pyfunction]
fn parse_records(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    positions: &Bound<'_, PyAny>,
    columns: &Bound<'_, PyAny>,
    problems: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    let buf = View::<u8>::read(buf)?;
    let positions = View::<i64>::read(positions)?;
    let inputs = [buf.span(), positions.span()];
    let mut columns = View::<i64>::write(columns, &inputs)?;
    let mut problems =
        View::<i8>::write(problems, &[buf.span(), positions.span(), columns.span()])?;
    let (bytes, pos) = (buf.slice(), positions.slice());
    let (cols, probs) = (columns.slice_mut(), problems.slice_mut());
    py.detach(|| header::parse_records(bytes, pos, cols, probs))
        .ok_or_else(|| {
            PyValueError::new_err("parse_records: the output arrays do not match the positions")
        })
}

/// The Python result of a gather-like kernel: Ok(value), or -(row + 1) for a row outside the buffer.
fn gather_result(result: Result<usize, columns::GatherError>) -> PyResult<i64> {
    match result {
        Ok(nulls) => Ok(nulls as i64),
        Err(columns::GatherError::OutOfRange(row)) => Ok(-(row as i64) - 1),
        Err(columns::GatherError::Shape) => Err(PyValueError::new_err(
            "the output buffers do not match the rows",
        )),
    }
}

/// gather(buf, pos, len, offsets, data, validity=None) -> null rows, or -(row + 1) for a row outside `buf`
///
/// `offsets`: int32 of len(pos) + 1; `data`: uint8 of the values' total length; `validity`: uint8 bitmap bytes.
#[pyfunction]
#[pyo3(signature = (buf, pos, len, offsets, data, validity=None))]
fn gather(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    pos: &Bound<'_, PyAny>,
    len: &Bound<'_, PyAny>,
    offsets: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    validity: Option<&Bound<'_, PyAny>>,
) -> PyResult<i64> {
    let (buf, pos, len) = (
        View::<u8>::read(buf)?,
        View::<i64>::read(pos)?,
        View::<i64>::read(len)?,
    );
    let mut inputs = vec![buf.span(), pos.span(), len.span()];
    let mut offsets = View::<i32>::write(offsets, &inputs)?;
    inputs.push(offsets.span());
    let mut data = View::<u8>::write(data, &inputs)?;
    inputs.push(data.span());
    let mut validity = validity
        .map(|v| View::<u8>::write(v, &inputs))
        .transpose()?;
    let (bytes, p, l) = (buf.slice(), pos.slice(), len.slice());
    let (o, d) = (offsets.slice_mut(), data.slice_mut());
    let v = validity.as_mut().map(|v| v.slice_mut());
    gather_result(py.detach(|| columns::gather(bytes, p, l, o, d, v)))
}

/// property_values(buf, pos, len, name, out_pos, out_len) -> 0, or -(row + 1) for a row outside `buf`
#[pyfunction]
fn property_values(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    pos: &Bound<'_, PyAny>,
    len: &Bound<'_, PyAny>,
    name: &[u8],
    out_pos: &Bound<'_, PyAny>,
    out_len: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    let (buf, pos, len) = (
        View::<u8>::read(buf)?,
        View::<i64>::read(pos)?,
        View::<i64>::read(len)?,
    );
    let mut inputs = vec![buf.span(), pos.span(), len.span()];
    let mut out_pos = View::<i64>::write(out_pos, &inputs)?;
    inputs.push(out_pos.span());
    let mut out_len = View::<i64>::write(out_len, &inputs)?;
    let (bytes, p, l) = (buf.slice(), pos.slice(), len.slice());
    let (op, ol) = (out_pos.slice_mut(), out_len.slice_mut());
    let result = py.detach(|| columns::property_values(bytes, p, l, name, op, ol));
    gather_result(result.map(|()| 0))
}

/// host_strings(buf, host_pos, sysflag, v6_flag, offsets, data) -> bytes used, or -(row + 1)
#[pyfunction]
fn host_strings(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    host_pos: &Bound<'_, PyAny>,
    sysflag: &Bound<'_, PyAny>,
    v6_flag: i32,
    offsets: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    let (buf, pos, flags) = (
        View::<u8>::read(buf)?,
        View::<i64>::read(host_pos)?,
        View::<i64>::read(sysflag)?,
    );
    let mut inputs = vec![buf.span(), pos.span(), flags.span()];
    let mut offsets = View::<i32>::write(offsets, &inputs)?;
    inputs.push(offsets.span());
    let mut data = View::<u8>::write(data, &inputs)?;
    let (bytes, p, f) = (buf.slice(), pos.slice(), flags.slice());
    let (o, d) = (offsets.slice_mut(), data.slice_mut());
    gather_result(py.detach(|| columns::host_strings(bytes, p, f, v6_flag, o, d)))
}

/// msg_ids(buf, store_host_pos, sysflag, phy_offset, offsets, data) -> bytes used, or -(row + 1)
#[pyfunction]
fn msg_ids(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    store_host_pos: &Bound<'_, PyAny>,
    sysflag: &Bound<'_, PyAny>,
    phy_offset: &Bound<'_, PyAny>,
    offsets: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    let buf = View::<u8>::read(buf)?;
    let (pos, flags) = (
        View::<i64>::read(store_host_pos)?,
        View::<i64>::read(sysflag)?,
    );
    let phy = View::<i64>::read(phy_offset)?;
    let mut inputs = vec![buf.span(), pos.span(), flags.span(), phy.span()];
    let mut offsets = View::<i32>::write(offsets, &inputs)?;
    inputs.push(offsets.span());
    let mut data = View::<u8>::write(data, &inputs)?;
    let (bytes, p, f, ph) = (buf.slice(), pos.slice(), flags.slice(), phy.slice());
    let (o, d) = (offsets.slice_mut(), data.slice_mut());
    gather_result(py.detach(|| columns::msg_ids(bytes, p, f, ph, o, d)))
}

/// property_pairs(data, pos, len, map_offsets, pairs) -> pairs found, or -(row + 1)
#[pyfunction]
fn property_pairs(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    pos: &Bound<'_, PyAny>,
    len: &Bound<'_, PyAny>,
    map_offsets: &Bound<'_, PyAny>,
    pairs: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    let (data, pos, len) = (
        View::<u8>::read(data)?,
        View::<i64>::read(pos)?,
        View::<i64>::read(len)?,
    );
    let mut inputs = vec![data.span(), pos.span(), len.span()];
    let mut offsets = View::<i32>::write(map_offsets, &inputs)?;
    inputs.push(offsets.span());
    let mut pairs = View::<i64>::write(pairs, &inputs)?;
    let (bytes, p, l) = (data.slice(), pos.slice(), len.slice());
    let (o, out) = (offsets.slice_mut(), pairs.slice_mut());
    gather_result(py.detach(|| columns::property_pairs(bytes, p, l, o, out)))
}

/// valid_units(units, out) -> units kept (`units`: the 20-byte units' bytes; `out`: uint8, one a unit)
#[pyfunction]
fn valid_units(
    py: Python<'_>,
    units: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    let units = View::<u8>::read(units)?;
    let mut out = View::<u8>::write(out, &[units.span()])?;
    let (bytes, flags) = (units.slice(), out.slice_mut());
    py.detach(|| consume_queue::valid_units(bytes, flags))
        .ok_or_else(|| PyValueError::new_err("valid_units: the output does not match the units"))
}

/// units_matching_tags(units, codes, out) -> units passing (`codes`: int32 tag hashes)
#[pyfunction]
fn units_matching_tags(
    py: Python<'_>,
    units: &Bound<'_, PyAny>,
    codes: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    let (units, codes) = (View::<u8>::read(units)?, View::<i32>::read(codes)?);
    let mut out = View::<u8>::write(out, &[units.span(), codes.span()])?;
    let (bytes, wanted, flags) = (units.slice(), codes.slice(), out.slice_mut());
    py.detach(|| consume_queue::units_matching_tags(bytes, wanted, flags))
        .ok_or_else(|| {
            PyValueError::new_err("units_matching_tags: the output does not match the units")
        })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    encode::register(m)?;
    m.add_function(wrap_pyfunction!(chain_record_starts, m)?)?;
    m.add_function(wrap_pyfunction!(magic_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(parse_records, m)?)?;
    m.add_function(wrap_pyfunction!(gather, m)?)?;
    m.add_function(wrap_pyfunction!(property_values, m)?)?;
    m.add_function(wrap_pyfunction!(host_strings, m)?)?;
    m.add_function(wrap_pyfunction!(msg_ids, m)?)?;
    m.add_function(wrap_pyfunction!(property_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(valid_units, m)?)?;
    m.add_function(wrap_pyfunction!(units_matching_tags, m)?)?;
    m.add("MAX_HOST_TEXT", columns::MAX_HOST_TEXT)?;
    m.add("MAX_MSG_ID_TEXT", columns::MAX_MSG_ID_TEXT)?;
    m.add("CHAIN_STOP", record_chain::ChainEnd::Stop as u8)?;
    m.add("CHAIN_BLANK", record_chain::ChainEnd::Blank as u8)?;
    m.add("CHAIN_DATA", record_chain::ChainEnd::Data as u8)?;
    m.add("CHAIN_BAD", record_chain::ChainEnd::Bad as u8)?;
    m.add("HEADER_COLUMNS", header::COLUMN_NAMES.to_vec())?;
    m.add("PROBLEM_NONE", header::PROBLEM_NONE)?;
    m.add("PROBLEM_MAGIC", header::PROBLEM_MAGIC)?;
    m.add("PROBLEM_TRUNCATED", header::PROBLEM_TRUNCATED)?;
    m.add("PROBLEM_NEGATIVE_LENGTH", header::PROBLEM_NEGATIVE_LENGTH)?;
    m.add("PROBLEM_LENGTH_MISMATCH", header::PROBLEM_LENGTH_MISMATCH)?;
    Ok(())
}
