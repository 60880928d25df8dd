//! Free space under `--data-dir`, checked before a persistent write is
//! applied.
//!
//! A full disk must be an error, never a loss or a stuck node. The
//! embedded database refuses all further I/O after one failed write until
//! it is reopened, and a failed Raft log append stops the engine for good;
//! so nothing waits for a write to fail. While the free space is below
//! `--data-min-free-bytes`, persistent writes are refused before anything
//! is applied (HTTP 507, a gRPC error payload, the Raft leader's refusal),
//! and a Raft log append on a follower waits for space instead of failing
//! ([`Disk::wait_for_space`]). Writes are accepted again as soon as the
//! space is back: the check is one `statvfs` per write, no state to clear.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Free space kept in reserve by default: room for a few commits, a Raft
/// snapshot of a large registry and the database's file growth.
pub const DEFAULT_MIN_FREE: u64 = 64 * 1024 * 1024;

/// The data directory's space check.
#[derive(Debug)]
pub struct Disk {
    dir: PathBuf,
    min_free: AtomicU64,
    /// Writes refused for lack of space.
    pub refused: AtomicU64,
}

/// Why a write was refused: the data directory is (nearly) full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "insufficient storage: the data directory has {free} bytes free, less than the {min} bytes \
     kept in reserve (--data-min-free-bytes); the write was not applied, and writes are accepted \
     again once space is freed"
)]
pub struct Full {
    /// Bytes free.
    pub free: u64,
    /// The reserve.
    pub min: u64,
}

impl Disk {
    /// A check of `dir` keeping `min_free` bytes in reserve.
    pub fn new(dir: &Path, min_free: u64) -> Disk {
        Disk {
            dir: dir.to_path_buf(),
            min_free: AtomicU64::new(min_free),
            refused: AtomicU64::new(0),
        }
    }

    /// Changes the reserve.
    pub fn set_min_free(&self, bytes: u64) {
        self.min_free.store(bytes, Ordering::Relaxed);
    }

    /// Bytes available to this process under the directory; `None` when
    /// the file system cannot say (then writes are not held back).
    pub fn free_bytes(&self) -> Option<u64> {
        let s = nix::sys::statvfs::statvfs(&self.dir).ok()?;
        Some(s.blocks_available().saturating_mul(s.fragment_size()))
    }

    /// Whether a write may go ahead.
    ///
    /// # Errors
    /// [`Full`] while less than the reserve is free.
    pub fn check(&self) -> Result<(), Full> {
        let min = self.min_free.load(Ordering::Relaxed);
        match self.free_bytes() {
            Some(free) if free < min => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                Err(Full { free, min })
            }
            _ => Ok(()),
        }
    }

    /// Waits until the reserve is free again (polling every 200 ms),
    /// logging once when it starts waiting.
    pub async fn wait_for_space(&self) {
        let mut logged = false;
        while let Err(full) = self.check() {
            if !logged {
                tracing::error!(dir = %self.dir.display(), %full, "data directory full: waiting for space");
                logged = true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if logged {
            tracing::info!(dir = %self.dir.display(), "space is back in the data directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_larger_than_the_disk_refuses_and_a_zero_one_accepts() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::new(dir.path(), u64::MAX);
        let err = disk.check().unwrap_err();
        assert!(err.to_string().starts_with("insufficient storage"), "{err}");
        assert_eq!(disk.refused.load(Ordering::Relaxed), 1);
        disk.set_min_free(0);
        assert!(disk.check().is_ok());
    }
}
