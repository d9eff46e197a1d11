//! Views of Python buffers (numpy arrays, memory maps, bytes) as Rust slices: the crate's only `unsafe` code.
//!
//! A view holds the buffer export (`PyBuffer`) for as long as the slice it lends lives, so the exporter can neither
//! free nor resize the memory meanwhile. `PyBuffer::get` has checked the element format, item size and alignment;
//! each view checks C-contiguity here, so the memory is `item_count` consecutive elements.

use pyo3::buffer::{Element, PyBuffer};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A C-contiguous Python buffer of `T`.
pub struct View<T: Element>(PyBuffer<T>);

impl<T: Element> View<T> {
    /// A buffer the kernel reads.
    pub fn read(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let buffer = PyBuffer::<T>::get(obj)?;
        if !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "the native kernels need C-contiguous buffers",
            ));
        }
        Ok(Self(buffer))
    }

    /// A buffer the kernel writes: writable and sharing no byte with `inputs`.
    pub fn write(obj: &Bound<'_, PyAny>, inputs: &[(usize, usize)]) -> PyResult<Self> {
        let view = Self::read(obj)?;
        if view.0.readonly() {
            return Err(PyValueError::new_err(
                "the native kernels' output buffers must be writable",
            ));
        }
        let (lo, hi) = view.span();
        if lo != hi && inputs.iter().any(|&(a, b)| a != b && lo < b && a < hi) {
            return Err(PyValueError::new_err(
                "a native kernel's output buffer overlaps one of its inputs",
            ));
        }
        Ok(view)
    }

    /// The addresses `[start, end)` of the buffer's bytes.
    pub fn span(&self) -> (usize, usize) {
        let start = self.0.buf_ptr() as usize;
        (start, start + self.0.len_bytes())
    }

    /// The buffer's elements.
    pub fn slice(&self) -> &[T] {
        let len = self.0.item_count();
        if len == 0 {
            return &[];
        }
        // SAFETY: the export is C-contiguous (checked in `read`), its pointer is aligned for T and its format is
        // T's (checked by `PyBuffer::get`), so it holds `len` initialised T at `buf_ptr`; the export is held by
        // `self.0` for the slice's lifetime, so the memory stays allocated and its size fixed. The kernels' inputs
        // are the store's read-only maps and arrays the calling wrapper owns: nothing writes them during a call.
        unsafe { std::slice::from_raw_parts(self.0.buf_ptr() as *const T, len) }
    }

    /// The buffer's elements, to fill.
    pub fn slice_mut(&mut self) -> &mut [T] {
        let len = self.0.item_count();
        if len == 0 {
            return &mut [];
        }
        // SAFETY: as in `slice`, plus: the export is writable (checked in `write`), it shares no byte with the
        // call's inputs (checked in `write`), and `&mut self` makes this the only Rust reference to it. The outputs
        // are arrays the calling wrapper has just allocated, which no other code holds during the call.
        unsafe { std::slice::from_raw_parts_mut(self.0.buf_ptr() as *mut T, len) }
    }
}
