//! The Python module `rocketstore_spark._native`: each function views its buffers, releases the GIL, runs one
//! kernel, and hands back what Python turns into arrays and errors.

mod buffers;
mod encode;
mod file_ranges;
mod queue_test;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use crate::{columns, consume_queue, decode, header, record_chain, record_crc};
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

/// parse_records(buf, positions, columns, problems, crc_mode=0) -> number of records that failed a check
///
/// `columns`: a C-contiguous int64 array of HEADER_COLUMNS × len(positions); `problems`: int8 of len(positions);
/// `crc_mode`: the CRC checks to run (CHECK_BODY_CRC | CHECK_PROP_CRC | REQUIRE_PROP_CRC).
#[pyfunction]
#[pyo3(signature = (buf, positions, columns, problems, crc_mode=0))]
fn parse_records(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    positions: &Bound<'_, PyAny>,
    columns: &Bound<'_, PyAny>,
    problems: &Bound<'_, PyAny>,
    crc_mode: u8,
) -> PyResult<usize> {
    let buf = View::<u8>::read(buf)?;
    let positions = View::<i64>::read(positions)?;
    let inputs = [buf.span(), positions.span()];
    let mut columns = View::<i64>::write(columns, &inputs)?;
    let mut problems =
        View::<i8>::write(problems, &[buf.span(), positions.span(), columns.span()])?;
    let (bytes, pos) = (buf.slice(), positions.slice());
    let (cols, probs) = (columns.slice_mut(), problems.slice_mut());
    py.detach(|| header::parse_records(bytes, pos, cols, probs, crc_mode))
        .ok_or_else(|| {
            PyValueError::new_err("parse_records: the output arrays do not match the positions")
        })
}

/// The Python result of a gather-like kernel: Ok(value), or -(row + 1) for a row outside the buffer.
fn gather_result(result: Result<usize, columns::GatherError>) -> PyResult<i64> {
    match result {
        Ok(nulls) => Ok(nulls as i64),
        Err(columns::GatherError::OutOfRange(row)) => Ok(-(row as i64) - 1),
        Err(columns::GatherError::Shape | columns::GatherError::Room) => Err(
            PyValueError::new_err("the output buffers do not match the rows"),
        ),
    }
}

/// The three views every value kernel reads: the source bytes, and one position and one length per row.
fn value_views(
    buf: &Bound<'_, PyAny>,
    pos: &Bound<'_, PyAny>,
    len: &Bound<'_, PyAny>,
) -> PyResult<(View<u8>, View<i64>, View<i64>)> {
    Ok((View::read(buf)?, View::read(pos)?, View::read(len)?))
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
    let (buf, pos, len) = value_views(buf, pos, len)?;
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
    let (buf, pos, len) = value_views(buf, pos, len)?;
    let mut inputs = vec![buf.span(), pos.span(), len.span()];
    let mut out_pos = View::<i64>::write(out_pos, &inputs)?;
    inputs.push(out_pos.span());
    let mut out_len = View::<i64>::write(out_len, &inputs)?;
    let (bytes, p, l) = (buf.slice(), pos.slice(), len.slice());
    let (op, ol) = (out_pos.slice_mut(), out_len.slice_mut());
    let result = py.detach(|| columns::property_values(bytes, p, l, name, op, ol));
    gather_result(result.map(|()| 0))
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
    let (data, pos, len) = value_views(data, pos, len)?;
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

/// The buffers of `decode_columns`' `outputs` list, in order (`...offsets` slots are int32, the others uint8).
const DECODE_OUTPUTS: [&str; 26] = [
    "topic.offsets",
    "topic.data",
    "body.offsets",
    "body.data",
    "propertiesString.offsets",
    "propertiesString.data",
    "properties.offsets",
    "properties.name_offsets",
    "properties.names",
    "properties.value_offsets",
    "properties.values",
    "tags.offsets",
    "tags.data",
    "tags.validity",
    "uniqKey.offsets",
    "uniqKey.data",
    "uniqKey.validity",
    "keys.offsets",
    "keys.token_offsets",
    "keys.tokens",
    "msgId.offsets",
    "msgId.data",
    "bornHost.offsets",
    "bornHost.data",
    "storeHost.offsets",
    "storeHost.data",
];

/// One output buffer of `decode_columns`.
enum DecodeSlot {
    Offsets(View<i32>),
    Bytes(View<u8>),
}

/// The next slot's int32 buffer (None when not given).
fn next_offsets<'a>(
    slots: &mut impl Iterator<Item = &'a mut Option<DecodeSlot>>,
) -> PyResult<Option<&'a mut [i32]>> {
    match slots.next() {
        Some(Some(DecodeSlot::Offsets(v))) => Ok(Some(v.slice_mut())),
        Some(None) => Ok(None),
        _ => Err(PyValueError::new_err(
            "decode_columns: an offsets buffer is not int32",
        )),
    }
}

/// The next slot's uint8 buffer (None when not given).
fn next_bytes<'a>(
    slots: &mut impl Iterator<Item = &'a mut Option<DecodeSlot>>,
) -> PyResult<Option<&'a mut [u8]>> {
    match slots.next() {
        Some(Some(DecodeSlot::Bytes(v))) => Ok(Some(v.slice_mut())),
        Some(None) => Ok(None),
        _ => Err(PyValueError::new_err(
            "decode_columns: a data buffer is not uint8",
        )),
    }
}

/// A column of binary values from its next `with_validity` + 2 slots: all given, or none (not decoded).
fn next_binary<'a>(
    slots: &mut impl Iterator<Item = &'a mut Option<DecodeSlot>>,
    with_validity: bool,
) -> PyResult<Option<decode::BinaryOut<'a>>> {
    let (offsets, data) = (next_offsets(slots)?, next_bytes(slots)?);
    let validity = if with_validity {
        next_bytes(slots)?
    } else {
        None
    };
    match (offsets, data) {
        (Some(o), Some(d)) if with_validity == validity.is_some() => {
            Ok(Some(decode::BinaryOut::new(o, d, validity)))
        }
        (None, None) if validity.is_none() => Ok(None),
        _ => Err(PyValueError::new_err(
            "decode_columns: a column needs all of its buffers or none",
        )),
    }
}

/// Views of `decode_columns`' / `decode_records`' `outputs` (one buffer or None per DECODE_OUTPUTS name), each
/// checked to share no byte with `taken` (the inputs' spans) or an earlier output.
fn output_slots(
    outputs: &[Option<Bound<'_, PyAny>>],
    mut taken: Vec<(usize, usize)>,
) -> PyResult<Vec<Option<DecodeSlot>>> {
    if outputs.len() != DECODE_OUTPUTS.len() {
        return Err(PyValueError::new_err(
            "decode: one output (or None) per DECODE_OUTPUTS name",
        ));
    }
    let mut slots = Vec::with_capacity(outputs.len());
    for (name, output) in DECODE_OUTPUTS.iter().zip(outputs) {
        let slot = match output {
            None => None,
            Some(obj) if name.ends_with("offsets") => {
                Some(DecodeSlot::Offsets(View::write(obj, &taken)?))
            }
            Some(obj) => Some(DecodeSlot::Bytes(View::write(obj, &taken)?)),
        };
        match &slot {
            Some(DecodeSlot::Offsets(v)) => taken.push(v.span()),
            Some(DecodeSlot::Bytes(v)) => taken.push(v.span()),
            None => {}
        }
        slots.push(slot);
    }
    Ok(slots)
}

/// The columns the output slots hold (a column is decoded when its buffers are given).
fn decode_outputs(slots: &mut [Option<DecodeSlot>]) -> PyResult<decode::Outputs<'_>> {
    let mut it = slots.iter_mut();
    let topic = next_binary(&mut it, false)?;
    let body = next_binary(&mut it, false)?;
    let properties_string = next_binary(&mut it, false)?;
    let map_offsets = next_offsets(&mut it)?;
    let (names, values) = (next_binary(&mut it, false)?, next_binary(&mut it, false)?);
    let properties = match (map_offsets, names, values) {
        (Some(offsets), Some(names), Some(values)) => Some(decode::MapOut {
            offsets,
            names,
            values,
        }),
        (None, None, None) => None,
        _ => {
            return Err(PyValueError::new_err(
                "decode: the properties map needs all of its buffers or none",
            ))
        }
    };
    let tags = next_binary(&mut it, true)?;
    let uniq_key = next_binary(&mut it, true)?;
    let keys = match (next_offsets(&mut it)?, next_binary(&mut it, false)?) {
        (Some(offsets), Some(tokens)) => Some(decode::ListOut { offsets, tokens }),
        (None, None) => None,
        _ => {
            return Err(PyValueError::new_err(
                "decode: keys need all of their buffers or none",
            ))
        }
    };
    Ok(decode::Outputs {
        topic,
        body,
        properties_string,
        properties,
        tags,
        uniq_key,
        keys,
        msg_id: next_binary(&mut it, false)?,
        born_host: next_binary(&mut it, false)?,
        store_host: next_binary(&mut it, false)?,
    })
}

/// The report's tail: pairs, tokens, then the bytes used and the nulls of topic, body, propertiesString, the
/// properties' names, their values, tags, uniqKey, keys' tokens, msgId, bornHost, storeHost.
fn decode_report(out: &decode::Outputs<'_>, counts: decode::Counts) -> Vec<i64> {
    let mut report = vec![counts.pairs as i64, counts.tokens as i64];
    let map_parts = out.properties.as_ref().map(|m| (&m.names, &m.values));
    let columns = [
        out.topic.as_ref(),
        out.body.as_ref(),
        out.properties_string.as_ref(),
        map_parts.map(|m| m.0),
        map_parts.map(|m| m.1),
        out.tags.as_ref(),
        out.uniq_key.as_ref(),
        out.keys.as_ref().map(|k| &k.tokens),
        out.msg_id.as_ref(),
        out.born_host.as_ref(),
        out.store_host.as_ref(),
    ];
    for column in columns {
        let (used, nulls) = column.map_or((0, 0), |c| (c.used(), c.nulls()));
        report.extend([used as i64, nulls as i64]);
    }
    report
}

/// decode_columns(buf, inputs, outputs) -> [bad row or -1, pairs, tokens, then the bytes used and the nulls of
/// topic, body, propertiesString, the properties' names, their values, tags, uniqKey, keys' tokens, msgId,
/// bornHost, storeHost]
///
/// `inputs`: int64 DECODE_INPUTS × n; `outputs`: one buffer or None per DECODE_OUTPUTS name (a column is decoded
/// when its buffers are given). A bad row's fields do not lie inside `buf`.
#[pyfunction]
fn decode_columns(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    inputs: &Bound<'_, PyAny>,
    outputs: Vec<Option<Bound<'_, PyAny>>>,
) -> PyResult<Vec<i64>> {
    let (buf, inputs) = (View::<u8>::read(buf)?, View::<i64>::read(inputs)?);
    let mut slots = output_slots(&outputs, vec![buf.span(), inputs.span()])?;
    let mut out = decode_outputs(&mut slots)?;
    let (bytes, rows) = (buf.slice(), inputs.slice());
    let result = py.detach(|| decode::decode(bytes, rows, &mut out));
    let counts = match result {
        Ok(counts) => counts,
        Err(columns::GatherError::OutOfRange(row)) => return Ok(vec![row as i64]),
        Err(columns::GatherError::Shape | columns::GatherError::Room) => {
            return Err(PyValueError::new_err(
                "decode_columns: the output buffers do not match the rows",
            ))
        }
    };
    let mut report = vec![-1];
    report.extend(decode_report(&out, counts));
    Ok(report)
}

/// decode_records(buf, positions, columns, problems, crc_mode, outputs, test=None, kept=None) -> [records that
/// failed a check (-1: a data buffer too small), rows written, then as decode_columns' report after its first
/// item]
///
/// `parse_records` and `decode_columns` in one pass over the records: `columns` (int64 HEADER_COLUMNS ×
/// len(positions)) and `problems` (int8) as parse_records fills them, `outputs` as decode_columns takes them; a
/// record that failed a check has an empty row. With a QueueTest `test` and `kept` (uint8, one per record), only
/// the records that passed their checks and the test are decoded, their rows in order (each buffer sized for
/// every record), and `kept` is 1 for those records.
#[pyfunction]
#[pyo3(signature = (buf, positions, columns, problems, crc_mode, outputs, test=None, kept=None))]
#[allow(clippy::too_many_arguments)]
fn decode_records(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    positions: &Bound<'_, PyAny>,
    columns: &Bound<'_, PyAny>,
    problems: &Bound<'_, PyAny>,
    crc_mode: u8,
    outputs: Vec<Option<Bound<'_, PyAny>>>,
    test: Option<&Bound<'_, queue_test::QueueTest>>,
    kept: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<i64>> {
    if test.is_some() != kept.is_some() {
        return Err(PyValueError::new_err(
            "decode_records: a queue test needs its kept marks, and marks a test",
        ));
    }
    let buf = View::<u8>::read(buf)?;
    let positions = View::<i64>::read(positions)?;
    let mut header_columns = View::<i64>::write(columns, &[buf.span(), positions.span()])?;
    let mut problems = View::<i8>::write(
        problems,
        &[buf.span(), positions.span(), header_columns.span()],
    )?;
    let mut taken = vec![
        buf.span(),
        positions.span(),
        header_columns.span(),
        problems.span(),
    ];
    let mut kept = match kept {
        Some(kept) => {
            let view = View::<u8>::write(kept, &taken)?;
            taken.push(view.span());
            Some(view)
        }
        None => None,
    };
    let mut slots = output_slots(&outputs, taken)?;
    let mut out = decode_outputs(&mut slots)?;
    let (bytes, pos) = (buf.slice(), positions.slice());
    let (cols, probs) = (header_columns.slice_mut(), problems.slice_mut());
    let rules = test.map(|test| &test.get().0);
    let result = py.detach(|| {
        let test = rules.zip(kept.as_mut().map(|k| k.slice_mut()));
        decode::decode_records(bytes, pos, cols, probs, crc_mode, test, &mut out)
    });
    let (failed, rows, counts) = match result {
        Ok(done) => done,
        Err(columns::GatherError::Room) => return Ok(vec![-1]),
        Err(columns::GatherError::Shape | columns::GatherError::OutOfRange(_)) => {
            return Err(PyValueError::new_err(
                "decode_records: the output buffers do not match the records",
            ))
        }
    };
    let mut report = vec![failed as i64, rows as i64];
    report.extend(decode_report(&out, counts));
    Ok(report)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    encode::register(m)?;
    file_ranges::register(m)?;
    queue_test::register(m)?;
    m.add_function(wrap_pyfunction!(chain_record_starts, m)?)?;
    m.add_function(wrap_pyfunction!(magic_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(parse_records, m)?)?;
    m.add_function(wrap_pyfunction!(gather, m)?)?;
    m.add_function(wrap_pyfunction!(property_values, m)?)?;
    m.add_function(wrap_pyfunction!(property_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(valid_units, m)?)?;
    m.add_function(wrap_pyfunction!(units_matching_tags, m)?)?;
    m.add_function(wrap_pyfunction!(decode_columns, m)?)?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    m.add("DECODE_INPUTS", decode::DECODE_INPUTS.to_vec())?;
    m.add("DECODE_OUTPUTS", DECODE_OUTPUTS.to_vec())?;
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
    m.add("PROBLEM_CRC", header::PROBLEM_CRC)?;
    m.add("PROBLEM_PROP_CRC", header::PROBLEM_PROP_CRC)?;
    m.add("CHECK_BODY_CRC", record_crc::CHECK_BODY_CRC)?;
    m.add("CHECK_PROP_CRC", record_crc::CHECK_PROP_CRC)?;
    m.add("REQUIRE_PROP_CRC", record_crc::REQUIRE_PROP_CRC)?;
    Ok(())
}
