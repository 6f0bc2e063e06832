//! A writer for the cpio "newc" format the kernel unpacks as an initramfs
//! (see the kernel's Documentation/driver-api/early-userspace/buffer-format.rst).
//!
//! Entries are collected first (parent directories are added automatically) and written in
//! path order, so directories always precede their contents. Several archives may be
//! concatenated into one initrd: the kernel unpacks them in turn, later files replacing
//! earlier ones.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::util::{Context, Result};

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFCHR: u32 = 0o020000;

#[derive(Debug, Clone)]
enum Entry {
    Dir,
    File { data: Data, mode: u32 },
    CharDev { major: u32, minor: u32, mode: u32 },
}

#[derive(Debug, Clone)]
enum Data {
    Bytes(Vec<u8>),
    /// Read at write time (follows symlinks on the host).
    Host(PathBuf),
}

/// An initramfs under construction.
#[derive(Debug, Default, Clone)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    pub fn new() -> Self {
        Self::default()
    }

    fn normalize(path: &str) -> String {
        path.trim_start_matches('/')
            .trim_end_matches('/')
            .to_string()
    }

    fn add_parents(&mut self, path: &str) {
        let mut parent = Path::new(path).parent();
        while let Some(p) = parent {
            let s = p.to_string_lossy();
            if s.is_empty() {
                break;
            }
            self.entries.entry(s.into_owned()).or_insert(Entry::Dir);
            parent = p.parent();
        }
    }

    fn insert(&mut self, path: &str, entry: Entry) {
        let path = Self::normalize(path);
        self.add_parents(&path);
        self.entries.insert(path, entry);
    }

    pub fn dir(&mut self, path: &str) {
        self.insert(path, Entry::Dir);
    }

    /// A file with the given contents.
    pub fn bytes(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) {
        self.insert(
            path,
            Entry::File {
                data: Data::Bytes(data.into()),
                mode,
            },
        );
    }

    /// A copy of a host file (contents read when the archive is written).
    pub fn host_file(&mut self, path: &str, host: &Path, mode: u32) {
        self.insert(
            path,
            Entry::File {
                data: Data::Host(host.to_path_buf()),
                mode,
            },
        );
    }

    pub fn char_dev(&mut self, path: &str, major: u32, minor: u32, mode: u32) {
        self.insert(path, Entry::CharDev { major, minor, mode });
    }

    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(&Self::normalize(path))
    }

    /// Write the archive (with its trailer) to `out`.
    pub fn write_to(&self, out: &mut impl Write) -> Result<()> {
        let mut w = NewcWriter {
            out,
            ino: 1,
            offset: 0,
        };
        for (path, entry) in &self.entries {
            match entry {
                Entry::Dir => w.entry(path, S_IFDIR | 0o755, 0, 0, &[]),
                Entry::CharDev { major, minor, mode } => {
                    w.entry(path, S_IFCHR | mode, *major, *minor, &[])
                }
                Entry::File {
                    data: Data::Bytes(b),
                    mode,
                } => w.entry(path, S_IFREG | mode, 0, 0, b),
                Entry::File {
                    data: Data::Host(host),
                    mode,
                } => {
                    let b = std::fs::read(host)
                        .context(|| format!("reading {} for the initramfs", host.display()))?;
                    w.entry(path, S_IFREG | mode, 0, 0, &b)
                }
            }
            .context(|| format!("writing initramfs entry {path}"))?;
        }
        w.entry("TRAILER!!!", 0, 0, 0, &[])
            .context(|| "writing initramfs trailer".to_string())?;
        Ok(())
    }

    /// Write the archive to a file.
    pub fn write_file(&self, path: &Path) -> Result<()> {
        let f = std::fs::File::create(path).context(|| format!("creating {}", path.display()))?;
        let mut w = io::BufWriter::new(f);
        self.write_to(&mut w)?;
        w.flush().context(|| format!("writing {}", path.display()))
    }
}

struct NewcWriter<'a, W: Write> {
    out: &'a mut W,
    ino: u32,
    offset: u64,
}

impl<W: Write> NewcWriter<'_, W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.offset += b.len() as u64;
        Ok(())
    }

    fn pad4(&mut self) -> io::Result<()> {
        let pad = (4 - (self.offset % 4) as usize) % 4;
        self.put(&[0u8; 3][..pad])
    }

    fn entry(
        &mut self,
        name: &str,
        mode: u32,
        rmajor: u32,
        rminor: u32,
        data: &[u8],
    ) -> io::Result<()> {
        let size = u32::try_from(data.len())
            .map_err(|_| io::Error::other(format!("{name} is larger than 4 GiB")))?;
        let ino = self.ino;
        self.ino += 1;
        let nlink = if mode & S_IFDIR != 0 { 2 } else { 1 };
        // magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
        // rdevmajor, rdevminor, namesize (with NUL), check
        let header = format!(
            "070701{ino:08X}{mode:08X}{:08X}{:08X}{nlink:08X}{:08X}{size:08X}{:08X}{:08X}{rmajor:08X}{rminor:08X}{:08X}{:08X}",
            0,
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad4()?;
        self.put(data)?;
        self.pad4()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, mode, rdev, data) of one entry.
    type Parsed = (String, u32, (u32, u32), Vec<u8>);

    /// Parse our own output back.
    fn parse(mut b: &[u8]) -> Vec<Parsed> {
        let mut out = Vec::new();
        let mut off = 0usize;
        loop {
            assert!(b.starts_with(b"070701"), "newc magic");
            let field = |i: usize| {
                u32::from_str_radix(std::str::from_utf8(&b[6 + 8 * i..14 + 8 * i]).unwrap(), 16)
                    .unwrap()
            };
            let mode = field(1);
            let size = field(6) as usize;
            let rdev = (field(9), field(10));
            let namesize = field(11) as usize;
            let name = std::str::from_utf8(&b[110..110 + namesize - 1])
                .unwrap()
                .to_string();
            assert_eq!(b[110 + namesize - 1], 0, "name is NUL-terminated");
            let mut pos = 110 + namesize;
            pos += (4 - (off + pos) % 4) % 4;
            let data = b[pos..pos + size].to_vec();
            pos += size;
            pos += (4 - (off + pos) % 4) % 4;
            off += pos;
            b = &b[pos..];
            if name == "TRAILER!!!" {
                assert!(b.is_empty(), "nothing after the trailer");
                return out;
            }
            out.push((name, mode, rdev, data));
        }
    }

    #[test]
    fn round_trip_with_parents_and_padding() {
        let mut a = Archive::new();
        a.bytes("/bin/hello", b"hi!\n".to_vec(), 0o755);
        a.bytes("/etc/x", b"12345".to_vec(), 0o644);
        a.char_dev("/dev/console", 5, 1, 0o600);
        let mut buf = Vec::new();
        a.write_to(&mut buf).unwrap();
        assert_eq!(buf.len() % 4, 0);
        let e = parse(&buf);
        let names: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            names,
            ["bin", "bin/hello", "dev", "dev/console", "etc", "etc/x"]
        );
        assert_eq!(e[0].1, S_IFDIR | 0o755);
        assert_eq!(e[1].1, S_IFREG | 0o755);
        assert_eq!(e[1].3, b"hi!\n");
        assert_eq!(e[3].1, S_IFCHR | 0o600);
        assert_eq!(e[3].2, (5, 1));
        assert_eq!(e[5].3, b"12345");
    }

    #[test]
    fn host_file_missing_is_a_clear_error() {
        let mut a = Archive::new();
        a.host_file("/x", Path::new("/nonexistent/uverbs-xtask-test"), 0o644);
        let e = a.write_to(&mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/uverbs-xtask-test"), "{e}");
    }
}
