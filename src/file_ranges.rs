//! Byte ranges of files copied back to back: the records a selective read picks from all over a commit-log file
//! (one positioned read per run of adjacent records), and short spans of many files (the few consume-queue units
//! a tag read tests in each of thousands of queues: an open, a read and a close per file).
//!
//! A selective read (1% of the records of a 1 GiB file) wants tens of thousands of ranges of about a KiB each;
//! copying them with positioned reads keeps nothing mapped (touching a map would fault a window of pages in
//! around every record). The loops are the hot part: one system call after the other, with no interpreter step
//! between them.

use std::io;

/// What can be read at a byte position (a file; a byte slice in tests).
pub trait ReadAt {
    /// Read into `buf` from byte `at`: the count read, 0 at the end.
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize>;
}

#[cfg(unix)]
impl ReadAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, at)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        (**self).read_at(buf, at)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        let start = usize::try_from(at).unwrap_or(usize::MAX).min(self.len());
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// Why [`read_runs`] stopped.
#[derive(Debug)]
pub enum RunsError {
    /// The runs do not fit the output (their lengths sum past it), or a start or length is negative.
    Shape,
    /// The source ended inside run `run`, `got` bytes into it.
    Short { run: usize, got: usize },
    /// The read itself failed.
    Io(io::Error),
}

/// Copy runs `[starts[i], starts[i] + lengths[i])` of `source` into `out`, back to back, in order.
pub fn read_runs<R: ReadAt + ?Sized>(
    source: &R,
    starts: &[i64],
    lengths: &[i64],
    out: &mut [u8],
) -> Result<(), RunsError> {
    each_slot(starts, lengths, out, |run, start, dest| {
        let got = read_full(source, dest, start).map_err(RunsError::Io)?;
        if got < dest.len() {
            return Err(RunsError::Short { run, got });
        }
        Ok(())
    })
}

/// Call `fill(i, start, slot)` for each run `i` in order, `slot` its `lengths[i]` bytes of `out` (the runs
/// back to back), after checking that the start and length are not negative and that the slot fits `out`.
fn each_slot<F: FnMut(usize, u64, &mut [u8]) -> Result<(), RunsError>>(
    starts: &[i64],
    lengths: &[i64],
    out: &mut [u8],
    mut fill: F,
) -> Result<(), RunsError> {
    if starts.len() != lengths.len() {
        return Err(RunsError::Shape);
    }
    let mut at = 0usize;
    for (i, (&start, &length)) in starts.iter().zip(lengths).enumerate() {
        let (Ok(start), Ok(length)) = (u64::try_from(start), usize::try_from(length)) else {
            return Err(RunsError::Shape);
        };
        let Some(dest) = at.checked_add(length).and_then(|end| out.get_mut(at..end)) else {
            return Err(RunsError::Shape);
        };
        fill(i, start, dest)?;
        at += length;
    }
    Ok(())
}

/// Fill `buf` from byte `at` of `source`: the count read, short only where the source ends.
fn read_full<R: ReadAt + ?Sized>(source: &R, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut got = 0usize;
    while got < buf.len() {
        match source.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Copy span `i`, `lengths[i]` bytes from byte `starts[i]` of the source `open(i)` gives, into `out`, back to
/// back, in order; `got[i]` is the count of its bytes read (short where its source ends), or -1 when `open`
/// failed (its bytes in `out` are left as they were). A failed read is an error.
pub fn read_spans<R: ReadAt, F: FnMut(usize) -> io::Result<R>>(
    mut open: F,
    starts: &[i64],
    lengths: &[i64],
    out: &mut [u8],
    got: &mut [i64],
) -> Result<(), RunsError> {
    if got.len() != starts.len() {
        return Err(RunsError::Shape);
    }
    each_slot(starts, lengths, out, |i, start, dest| {
        got[i] = match open(i) {
            Ok(source) => read_full(&source, dest, start).map_err(RunsError::Io)? as i64,
            Err(_) => -1,
        };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_runs_back_to_back() {
        let source: Vec<u8> = (0..100u8).collect();
        let mut out = vec![0u8; 7];
        read_runs(source.as_slice(), &[10, 50, 98], &[3, 2, 2], &mut out).unwrap();
        assert_eq!(out, [10, 11, 12, 50, 51, 98, 99]);
    }

    #[test]
    fn a_run_past_the_end_is_short() {
        let source: Vec<u8> = (0..100u8).collect();
        let mut out = vec![0u8; 8];
        match read_runs(source.as_slice(), &[0, 96], &[2, 6], &mut out) {
            Err(RunsError::Short { run, got }) => assert_eq!((run, got), (1, 4)),
            other => panic!("expected a short run, got {other:?}"),
        }
    }

    #[test]
    fn spans_of_several_sources_tell_what_each_gave() {
        let sources: [Vec<u8>; 2] = [(0..10u8).collect(), (100..104u8).collect()];
        let mut out = vec![0u8; 7];
        let mut got = vec![0i64; 3];
        read_spans(
            |i| match i {
                0 => Ok(sources[0].as_slice()),
                1 => Err(io::Error::from(io::ErrorKind::NotFound)),
                _ => Ok(sources[1].as_slice()),
            },
            &[8, 0, 1],
            &[2, 2, 3],
            &mut out,
            &mut got,
        )
        .unwrap();
        assert_eq!(got, [2, -1, 3]);
        assert_eq!(
            (&out[..2], &out[4..]),
            (&[8u8, 9][..], &[101u8, 102, 103][..])
        );
        let mut short = vec![0i64; 1];
        read_spans(
            |_| Ok(sources[1].as_slice()),
            &[2],
            &[4],
            &mut out[..4],
            &mut short,
        )
        .unwrap();
        assert_eq!(short, [2]);
    }

    #[test]
    fn runs_larger_than_the_output_or_negative_are_refused() {
        let source = [0u8; 16];
        let mut out = vec![0u8; 4];
        assert!(matches!(
            read_runs(source.as_slice(), &[0], &[5], &mut out),
            Err(RunsError::Shape)
        ));
        assert!(matches!(
            read_runs(source.as_slice(), &[-1], &[2], &mut out),
            Err(RunsError::Shape)
        ));
        assert!(matches!(
            read_runs(source.as_slice(), &[0, 1], &[2], &mut out),
            Err(RunsError::Shape)
        ));
    }
}
