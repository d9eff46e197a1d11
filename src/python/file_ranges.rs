//! `read_ranges` and `read_spans`: byte ranges of local files copied back to back (see [`crate::file_ranges`]).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::buffers::View;
use crate::file_ranges::{self, RunsError};

/// read_ranges(path, starts, lengths, out) -> (run, got): (-1, 0) when every run was copied, else the run the
/// file ended in and the bytes of it read (`starts`, `lengths`: int64 runs; `out`: uint8, their lengths' sum).
/// A file that cannot be opened or read raises the OSError Python's own `open` would.
#[pyfunction]
fn read_ranges(
    py: Python<'_>,
    path: std::path::PathBuf,
    starts: &Bound<'_, PyAny>,
    lengths: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    let (starts, lengths) = (View::<i64>::read(starts)?, View::<i64>::read(lengths)?);
    let mut out = View::<u8>::write(out, &[starts.span(), lengths.span()])?;
    let (starts, lengths, bytes) = (starts.slice(), lengths.slice(), out.slice_mut());
    let copied = py.detach(|| {
        let file = std::fs::File::open(&path).map_err(RunsError::Io)?;
        file_ranges::read_runs(&file, starts, lengths, bytes)
    });
    match copied {
        Ok(()) => Ok((-1, 0)),
        Err(RunsError::Short { run, got }) => Ok((run as i64, got as i64)),
        Err(RunsError::Shape) => Err(PyValueError::new_err(
            "read_ranges: the runs do not match the output buffer",
        )),
        Err(RunsError::Io(e)) => Err(e.into()),
    }
}

/// read_spans(paths, starts, lengths, out, got): span `i`, `lengths[i]` bytes from byte `starts[i]` of file
/// `paths[i]`, copied into `out` back to back; `got[i]` (int64) the bytes of it read, -1 when the file could not be
/// opened (`starts`, `lengths`: int64; `out`: uint8, their lengths' sum). A failed read raises its OSError.
#[pyfunction]
fn read_spans(
    py: Python<'_>,
    paths: Vec<std::path::PathBuf>,
    starts: &Bound<'_, PyAny>,
    lengths: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    got: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let (starts, lengths) = (View::<i64>::read(starts)?, View::<i64>::read(lengths)?);
    let mut out = View::<u8>::write(out, &[starts.span(), lengths.span()])?;
    let mut got = View::<i64>::write(got, &[starts.span(), lengths.span(), out.span()])?;
    if paths.len() != starts.slice().len() {
        return Err(PyValueError::new_err(
            "read_spans: one path a span is expected",
        ));
    }
    let (starts, lengths, bytes, counts) = (
        starts.slice(),
        lengths.slice(),
        out.slice_mut(),
        got.slice_mut(),
    );
    let copied = py.detach(|| {
        file_ranges::read_spans(
            |i| std::fs::File::open(&paths[i]),
            starts,
            lengths,
            bytes,
            counts,
        )
    });
    match copied {
        Ok(()) => Ok(()),
        Err(RunsError::Io(e)) => Err(e.into()),
        Err(_) => Err(PyValueError::new_err(
            "read_spans: the spans do not match the output buffers",
        )),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(read_spans, m)?)?;
    Ok(())
}
