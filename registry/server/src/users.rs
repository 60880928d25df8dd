//! `registry users add|remove`: editing the `--auth-users` file so nobody
//! has to craft a PBKDF2 line by hand.
//!
//! An edit reads the file (a missing file is an empty one for `add`),
//! changes one user's line and keeps every other line (comments
//! included) as it was, checks that the result is a users file the server
//! loads, then replaces the file atomically: the new text goes to a
//! temporary file in the same directory, created with mode 0600 (it holds
//! password hashes), synced, and renamed over the old one, and the
//! directory is synced. A crash leaves the old file or the new one, never
//! half of either. Two edits at the same moment: the last rename wins.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use crate::auth::{hash_password, valid_name, Auth};

/// PBKDF2 iterations of a new password hash (today's advice for SHA-256).
pub const DEFAULT_ITERATIONS: u32 = 600_000;

/// What [`add`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Added {
    /// A new user.
    Created,
    /// An existing user's password was replaced.
    Replaced,
}

/// Adds user `name` with `password` to the users file at `path`, or
/// replaces the password of an existing user.
///
/// # Errors
/// A bad name or empty password, an existing file the server would not
/// load, or an I/O error.
pub fn add(path: &Path, name: &str, password: &str, iterations: u32) -> anyhow::Result<Added> {
    if !valid_name(name) {
        bail!("user names are 1-64 characters of A-Z a-z 0-9 _ . @ -, got {name:?}");
    }
    if password.is_empty() {
        bail!("the password is empty");
    }
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    check_loads(&text, path, true)?;
    let line = format!("{name}:{}", hash_password(password, iterations)?);
    let mut replaced = false;
    let mut out = String::with_capacity(text.len() + line.len() + 1);
    for l in text.lines() {
        if user_of(l) == Some(name) {
            out.push_str(&line);
            replaced = true;
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    if !replaced {
        out.push_str(&line);
        out.push('\n');
    }
    check_loads(&out, path, false)?;
    replace(path, &out)?;
    Ok(if replaced {
        Added::Replaced
    } else {
        Added::Created
    })
}

/// Removes user `name` from the users file at `path`. Returns how many
/// users are left.
///
/// # Errors
/// No such user, a file the server would not load, or an I/O error.
pub fn remove(path: &Path, name: &str) -> anyhow::Result<usize> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    check_loads(&text, path, false)?;
    let mut out = String::with_capacity(text.len());
    let (mut found, mut left) = (false, 0);
    for l in text.lines() {
        match user_of(l) {
            Some(n) if n == name => {
                found = true;
                continue;
            }
            Some(_) => left += 1,
            None => {}
        }
        out.push_str(l);
        out.push('\n');
    }
    if !found {
        bail!("no user {name} in {}", path.display());
    }
    replace(path, &out)?;
    Ok(left)
}

/// The user a line defines, if it is not blank or a comment.
fn user_of(line: &str) -> Option<&str> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    Some(line.split_once(':').map_or(line, |(name, _)| name))
}

/// Refuses to edit a file the server would not load (an empty one is fine
/// when `empty_ok`: `add` is about to give it a user).
fn check_loads(text: &str, path: &Path, empty_ok: bool) -> anyhow::Result<()> {
    if empty_ok && text.lines().all(|l| user_of(l).is_none()) {
        return Ok(());
    }
    match Auth::from_text(text, [0; 32], 1, 1) {
        Ok(_) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("{} is not a valid users file", path.display())),
    }
}

/// Writes `text` to `path` atomically, mode 0600.
fn replace(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let written = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::MIN_ITERATIONS;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn add_replace_remove_keep_other_lines_and_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        std::fs::write(&path, "# staff\n\n").unwrap();
        assert_eq!(
            add(&path, "alice", "pw1", MIN_ITERATIONS).unwrap(),
            Added::Created
        );
        assert_eq!(
            add(&path, "bob", "pw2", MIN_ITERATIONS).unwrap(),
            Added::Created
        );
        let before = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            add(&path, "alice", "pw3", MIN_ITERATIONS).unwrap(),
            Added::Replaced
        );
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(
            after.starts_with("# staff\n\nalice:pbkdf2-sha256$"),
            "{after}"
        );
        assert_ne!(before, after, "a new hash");
        let auth = Auth::from_text(&after, [1; 32], 60, 1).unwrap();
        assert!(auth.login("alice", "pw3").is_ok());
        assert!(auth.login("alice", "pw1").is_err());
        assert!(auth.login("bob", "pw2").is_ok());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(remove(&path, "alice").unwrap(), 1);
        assert!(remove(&path, "alice").is_err());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# staff\n\nbob:"), "{text}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
        assert!(add(&path, "bad name", "x", MIN_ITERATIONS).is_err());
        assert!(add(&path, "carol", "", MIN_ITERATIONS).is_err());
        std::fs::write(&path, "garbage\n").unwrap();
        let e = add(&path, "dave", "x", MIN_ITERATIONS).unwrap_err();
        assert!(format!("{e:#}").contains("not a valid users file"), "{e:#}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "garbage\n",
            "left alone"
        );
    }
}
