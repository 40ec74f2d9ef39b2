//! The guest command protocol: a job written as a shell script into its
//! own directory under the jobs share, started by a `run <id>` line on the
//! control port (`kill <id>` ends it), its output, pid and status read back
//! from files the guest's agent writes there.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::qemu::tail;
use crate::{Error, Vm};

/// A command to run in the guest.
#[derive(Clone, Debug)]
pub struct Job {
    pub argv: Vec<OsString>,
    /// Set on top of the guest's own `PATH` and `HOME`.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    /// Killed (its whole process group) after this long.
    pub timeout: Duration,
}

impl Job {
    pub fn new<I, S>(argv: I) -> Job
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Job {
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: PathBuf::from("/"),
            timeout: Duration::from_secs(120),
        }
    }

    pub fn env(mut self, k: impl Into<OsString>, v: impl Into<OsString>) -> Job {
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Job {
        self.cwd = dir.into();
        self
    }

    pub fn timeout(mut self, t: Duration) -> Job {
        self.timeout = t;
        self
    }

    /// The job as a shell script.
    fn script(&self) -> Vec<u8> {
        let mut s = Vec::new();
        for (k, v) in &self.env {
            s.extend_from_slice(b"export ");
            s.extend_from_slice(k.as_bytes());
            s.push(b'=');
            quote(&mut s, v.as_bytes());
            s.push(b'\n');
        }
        // The pid the program will have (the shell execs it).
        s.extend_from_slice(b"echo $$ > \"${0%/*}/program.pid\"\n");
        s.extend_from_slice(b"cd ");
        quote(&mut s, self.cwd.as_os_str().as_bytes());
        s.extend_from_slice(b" || exit 126\nexec");
        for a in &self.argv {
            s.push(b' ');
            quote(&mut s, a.as_bytes());
        }
        s.push(b'\n');
        s
    }
}

/// `'...'` with every `'` as `'\''`.
pub(crate) fn quote(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'\'');
    for &b in s {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
}

/// A job's result.
#[derive(Clone, Debug)]
pub struct Output {
    /// The shell's status: the exit code, or 128 + the signal's number.
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Killed for running past its timeout.
    pub timed_out: bool,
}

/// A job under way.
pub struct Running<'a> {
    vm: &'a Vm,
    id: u64,
    dir: PathBuf,
    timeout: Duration,
    started: Instant,
}

impl Vm {
    /// Starts a job.
    pub fn spawn(&self, job: &Job) -> Result<Running<'_>, Error> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join("jobs").join(id.to_string());
        let fail = |e: std::io::Error| Error::Failed(format!("job {id}: {e}"));
        std::fs::create_dir(&dir).map_err(fail)?;
        std::fs::write(dir.join("cmd"), job.script()).map_err(fail)?;
        std::fs::write(
            dir.join("timeout"),
            format!("{}\n", job.timeout.as_secs_f64().ceil() as u64),
        )
        .map_err(fail)?;
        self.send(&format!("run {id}\n"))?;
        Ok(Running {
            vm: self,
            id,
            dir,
            timeout: job.timeout,
            started: Instant::now(),
        })
    }

    /// Runs a job to its end.
    pub fn run(&self, job: &Job) -> Result<Output, Error> {
        self.spawn(job)?.wait()
    }

    pub(crate) fn send(&self, line: &str) -> Result<(), Error> {
        let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
        ctl.write_all(line.as_bytes()).map_err(|e| {
            Error::Failed(format!(
                "the VM's control port: {e}; its console:\n{}",
                tail(&self.dir.join("console.log"))
            ))
        })
    }
}

impl Running<'_> {
    /// The job's result, if it has ended.
    pub fn try_wait(&self) -> Result<Option<Output>, Error> {
        let Ok(rc) = std::fs::read_to_string(self.dir.join("rc")) else {
            if !self.vm.alive() {
                return Err(Error::Failed(format!(
                    "the VM died while job {} ran; its console:\n{}",
                    self.id,
                    tail(&self.vm.dir.join("console.log"))
                )));
            }
            return Ok(None);
        };
        let status: i32 = rc.trim().parse().unwrap_or(-1);
        let read = |n: &str| std::fs::read(self.dir.join(n)).unwrap_or_default();
        Ok(Some(Output {
            // `timeout -s KILL` gives 137, as a kill by SIGKILL does.
            timed_out: status == 137 && self.started.elapsed() >= self.timeout,
            status,
            stdout: read("out"),
            stderr: read("err"),
        }))
    }

    /// Waits for the end: the guest kills the job at its timeout; the host
    /// gives up 30 s later (a guest too slow even for that).
    pub fn wait(self) -> Result<Output, Error> {
        self.wait_streaming(None)
    }

    /// As [`Running::wait`], copying the job's output to `sink` (stdout,
    /// stderr) as it comes.
    pub fn wait_streaming(
        self,
        mut sink: Option<(&mut dyn Write, &mut dyn Write)>,
    ) -> Result<Output, Error> {
        let mut sent = [0usize; 2];
        let give_up = self.timeout + Duration::from_secs(30);
        loop {
            let done = self.try_wait()?;
            if let Some((out, err)) = sink.as_mut() {
                self.copy_new("out", &mut sent[0], &mut **out);
                self.copy_new("err", &mut sent[1], &mut **err);
            }
            if let Some(o) = done {
                return Ok(o);
            }
            if self.started.elapsed() > give_up {
                self.kill();
                return Err(Error::Failed(format!(
                    "job {} did not end within {give_up:?}",
                    self.id
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Writes what file `name` holds past `*sent` to `w`.
    fn copy_new(&self, name: &str, sent: &mut usize, w: &mut dyn Write) {
        if let Ok(data) = std::fs::read(self.dir.join(name)) {
            if data.len() > *sent {
                let _ = w.write_all(&data[*sent..]);
                let _ = w.flush();
                *sent = data.len();
            }
        }
    }

    /// The program's pid in the guest, once its shell has started.
    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.join("program.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Kills the job's whole process group.
    pub fn kill(&self) {
        let _ = self.vm.send(&format!("kill {}\n", self.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_a_script_with_every_word_quoted() {
        let j = Job::new(["prog", "it's"]).env("A", "x y").cwd("/w d");
        assert_eq!(
            String::from_utf8(j.script()).unwrap(),
            "export A='x y'\necho $$ > \"${0%/*}/program.pid\"\ncd '/w d' || exit 126\nexec 'prog' 'it'\\''s'\n"
        );
    }
}
