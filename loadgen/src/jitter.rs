//! The machine's own timer wake-up lateness, measured during the run on loadgen's
//! cores: the floor under every send lag.
//!
//! A worker sends a request when it wakes at the request's due time; however good
//! the generator, it cannot send earlier than the kernel wakes a thread sleeping
//! until that time. On a quiet machine that is a few microseconds; on a shared
//! virtual machine tens to hundreds (the hypervisor, other guests, the workers
//! themselves on the same cores). Without it nobody can tell how far a send lag is
//! from the best the machine allows. So while the workers run, a [`Probe`] thread,
//! started with loadgen's own CPU affinity (or pinned to one core by a test), does
//! nothing but sleep until absolute times on the monotonic clock
//! (`clock_nanosleep(TIMER_ABSTIME)`, its timer slack lowered as the workers' is)
//! every [`PERIOD`] and records how late each wake-up was, in µs, into an
//! HdrHistogram. Being bare (no runtime, no epoll, no other task), it measures the
//! machine and the load the workers put on their cores, not loadgen's own code.
//!
//! The report carries it beside send lag (`wakeup_lateness`), and the
//! generator-limited verdict holds send lag against it (`reports::lag`). Its cost:
//! [`PERIOD`] wake-ups a second (1000), a fraction of a percent of one core.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::Histogram;
use nix::time::{clock_nanosleep, ClockId, ClockNanosleepFlags};

/// How often the probe wakes.
pub const PERIOD: Duration = Duration::from_millis(1);

/// A running wake-up probe; [`Probe::stop`] ends it and hands back what it measured
/// (dropped, it ends too: a run that fails leaves no probe behind).
#[derive(Debug)]
pub struct Probe {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Histogram<u64>>>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Probe {
    /// Starts the probe on a thread of its own, with the process's CPU affinity (the
    /// cores loadgen runs on), or pinned to `cpu`.
    pub fn start(cpu: Option<usize>) -> std::io::Result<Probe> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("loadgen-jitter".to_owned())
            .spawn(move || {
                if let Some(cpu) = cpu {
                    // A test's pinning; the probe measures wherever it runs if refused.
                    let _ = pin(cpu);
                }
                measure(&flag, PERIOD)
            })?;
        Ok(Probe {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the probe; the lateness of every wake-up since its start, µs.
    pub fn stop(mut self) -> Histogram<u64> {
        self.stop.store(true, Ordering::Relaxed);
        // A panic in the probe loses only the measurement, never the run.
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_else(reports::new_histogram)
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) -> nix::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

/// The first CPU the calling thread may run on.
pub fn first_allowed_cpu() -> Option<usize> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    (0..nix::sched::CpuSet::count()).find(|&c| set.is_set(c).unwrap_or(false))
}

/// Sleeps until each next multiple of `period` after the start until `stop` is set,
/// recording each wake-up's lateness (µs). A wake-up later than a whole period skips
/// the deadlines it overslept instead of waking at once for each (they would read as
/// early wake-ups of a busy loop, not as the machine's lateness).
fn measure(stop: &AtomicBool, period: Duration) -> Histogram<u64> {
    // Relaxed: the flag carries no data; the join that follows orders everything.
    let mut lateness = reports::new_histogram();
    let _ = nix::sys::prctl::set_timerslack(1);
    let clock = ClockId::CLOCK_MONOTONIC;
    let Ok(start) = clock.now() else {
        return lateness;
    };
    let period = period.as_nanos() as i128;
    let nanos = |t: nix::sys::time::TimeSpec| {
        i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec())
    };
    let mut due = nanos(start) + period;
    while !stop.load(Ordering::Relaxed) {
        let target = nix::sys::time::TimeSpec::new(
            (due / 1_000_000_000) as i64,
            (due % 1_000_000_000) as i64,
        );
        if clock_nanosleep(clock, ClockNanosleepFlags::TIMER_ABSTIME, &target).is_err() {
            continue; // interrupted by a signal: sleep again until the same time
        }
        let Ok(now) = clock.now() else { break };
        let late = (nanos(now) - due).max(0);
        let _ = lateness.record((late / 1_000) as u64);
        due += period * (1 + late / period);
    }
    lateness
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calibration on a busy core: a thread spins on the probe's own core the
    /// whole time, and the probe still records its wake-ups (how late they are is
    /// the machine's, a benchmark figure, not asserted here).
    #[test]
    fn wakeups_on_a_busy_core_are_recorded() {
        let cpu = first_allowed_cpu().expect("some CPU is allowed");
        let spinning = Arc::new(AtomicBool::new(true));
        let spinner = {
            let spinning = spinning.clone();
            std::thread::spawn(move || {
                pin(cpu).expect("the spinner pins to the probe's core");
                while spinning.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let started = std::time::Instant::now();
        let probe = Probe::start(Some(cpu)).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let lateness = probe.stop();
        // The deadlines that passed while it ran (a loaded machine sleeps past 300 ms).
        let deadlines = started.elapsed().as_nanos() / PERIOD.as_nanos();
        spinning.store(false, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(!lateness.is_empty(), "wake-ups recorded");
        assert!(lateness.value_at_quantile(0.99) >= lateness.value_at_quantile(0.5));
        assert!(
            u128::from(lateness.len()) <= deadlines,
            "at most one per period: {} wake-ups in {deadlines} periods",
            lateness.len()
        );
    }
}
