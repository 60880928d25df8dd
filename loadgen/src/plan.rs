//! The plan of a run: its phases, in order, with their rates.
//!
//! Every run follows the same shape, whatever the profile:
//!
//! 1. **load**: register the fleet at `load.rate`; each instance starts beating at the
//!    server's `clientBeatInterval` from its registration on.
//! 2. **steady**: for `steady.duration`, beats go on and the mix runs: registrations,
//!    deregistrations, queries, subscribers joining (at its start) and churning.
//! 3. **settle**: the mix stops (beats and subscriber polls go on) until every change is
//!    answered and every subscriber's view equals the expected list; then the server is
//!    verified.
//! 4. **drain** (optional): deregister everything at `drain.rate`, then settle and
//!    verify again (every subscriber must end with an empty list).
//!
//! The phases are driven by the runner; workers read the current [`Phase`] and its
//! start time and derive their own schedules from [`Rates`].

use std::fmt;
use std::time::Duration;

use reports::{PhaseOp, PhaseRates};

use crate::profile::Profile;
use crate::recorder::{Op, Stats};
use crate::schedule::{Nanos, SECOND};

/// A phase of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Phase {
    /// Workers are starting.
    Init = 0,
    /// Registering the fleet.
    Load = 1,
    /// The measured mix.
    Steady = 2,
    /// Waiting for changes and pushes to settle before verifying.
    Settle = 3,
    /// Deregistering everything.
    Drain = 4,
    /// Waiting for the drain's pushes to settle before the final verification.
    Final = 5,
    /// Workers stop.
    Stop = 6,
}

impl Phase {
    /// The phase stored as `v` (see [`Phase::as_u8`]); unknown values read as `Stop`.
    pub fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Init,
            1 => Phase::Load,
            2 => Phase::Steady,
            3 => Phase::Settle,
            4 => Phase::Drain,
            5 => Phase::Final,
            _ => Phase::Stop,
        }
    }

    /// The value stored in an atomic.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Init => "init",
            Phase::Load => "load",
            Phase::Steady => "steady",
            Phase::Settle => "settle",
            Phase::Drain => "drain",
            Phase::Final => "final",
            Phase::Stop => "stop",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Operations per second a phase schedules (beats and polls are not here: they follow
/// each instance's beat interval and each subscriber's poll interval).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Registrations per second.
    pub register: f64,
    /// Deregistrations per second.
    pub deregister: f64,
    /// Queries per second.
    pub query: f64,
    /// Subscribers replaced per second.
    pub subscriber_churn: f64,
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The phase.
    pub phase: Phase,
    /// How long it should take: fixed for steady, estimated from the rate for load and
    /// drain, an upper bound for the settle phases.
    pub duration: Duration,
    /// What it schedules.
    pub rates: Rates,
}

/// The resolved plan of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The steps in order.
    pub steps: Vec<Step>,
    /// Registrations in the load phase.
    pub instances: u64,
    /// Subscribers joining at the start of the steady phase.
    pub subscribers: u64,
    /// Subscribers joining per second.
    pub join_rate: f64,
}

impl Plan {
    /// The plan a profile describes.
    pub fn from_profile(p: &Profile) -> Plan {
        let secs = |n: f64, rate: f64| {
            if n <= 0.0 || rate <= 0.0 {
                Duration::ZERO
            } else {
                Duration::from_secs_f64(n / rate)
            }
        };
        let instances = f64::from(p.fleet.instances);
        let mut steps = vec![
            Step {
                phase: Phase::Load,
                duration: secs(instances, p.load.rate),
                rates: Rates {
                    register: p.load.rate,
                    ..Rates::default()
                },
            },
            Step {
                phase: Phase::Steady,
                duration: p.steady.duration.0,
                rates: Rates {
                    register: p.steady.register_rate,
                    deregister: p.steady.deregister_rate,
                    query: p.steady.query_rate,
                    subscriber_churn: p.steady.subscriber_churn_rate,
                },
            },
            Step {
                phase: Phase::Settle,
                duration: p.generator.settle_timeout.0,
                rates: Rates::default(),
            },
        ];
        if p.drain.enabled {
            let net = (p.steady.register_rate - p.steady.deregister_rate)
                * p.steady.duration.0.as_secs_f64();
            steps.push(Step {
                phase: Phase::Drain,
                duration: secs(instances + net.max(0.0), p.drain.rate),
                rates: Rates {
                    deregister: p.drain.rate,
                    ..Rates::default()
                },
            });
            steps.push(Step {
                phase: Phase::Final,
                duration: p.generator.settle_timeout.0,
                rates: Rates::default(),
            });
        }
        let join_rate = if p.subscribers.join_rate > 0.0 {
            p.subscribers.join_rate
        } else {
            f64::from(p.fleet.subscribers.max(1))
        };
        Plan {
            steps,
            instances: u64::from(p.fleet.instances),
            subscribers: u64::from(p.fleet.subscribers),
            join_rate,
        }
    }

    /// The step of `phase`, if the plan has it.
    pub fn step(&self, phase: Phase) -> Option<&Step> {
        self.steps.iter().find(|s| s.phase == phase)
    }

    /// The rates of `phase` (zero for phases the plan lacks).
    pub fn rates(&self, phase: Phase) -> Rates {
        self.step(phase).map(|s| s.rates).unwrap_or_default()
    }

    /// Expected length when nothing waits: load, steady and drain (settling is usually
    /// far shorter than its bound).
    pub fn expected_duration(&self) -> Duration {
        self.steps
            .iter()
            .filter(|s| !matches!(s.phase, Phase::Settle | Phase::Final))
            .map(|s| s.duration)
            .sum()
    }

    /// One line per step, for the start of a run.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for s in &self.steps {
            let r = s.rates;
            let mut parts = Vec::new();
            for (name, v) in [
                ("register", r.register),
                ("deregister", r.deregister),
                ("query", r.query),
                ("subscriber churn", r.subscriber_churn),
            ] {
                if v > 0.0 {
                    parts.push(format!("{name} {v}/s"));
                }
            }
            let what = match s.phase {
                Phase::Settle | Phase::Final => "wait for convergence, verify".to_owned(),
                _ if parts.is_empty() => "beats only".to_owned(),
                _ => parts.join(", "),
            };
            let bound = if matches!(s.phase, Phase::Settle | Phase::Final) {
                "up to "
            } else {
                "~"
            };
            out.push_str(&format!(
                "  {:<7} {bound}{:.1}s: {what}\n",
                s.phase.name(),
                s.duration.as_secs_f64()
            ));
        }
        out
    }
}

/// When a phase of a run began and ended, on the run's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The phase.
    pub phase: Phase,
    /// Its start.
    pub start: Nanos,
    /// Its end (the next phase's start).
    pub end: Nanos,
}

impl Span {
    fn secs(&self) -> f64 {
        self.end.saturating_sub(self.start) as f64 / SECOND as f64
    }
}

impl Rates {
    /// The rate at which the plan schedules `op` (`None`: `op` is not rate-driven;
    /// beats and polls follow their intervals).
    pub fn of(&self, op: Op) -> Option<f64> {
        match op {
            Op::Register => Some(self.register),
            Op::Deregister => Some(self.deregister),
            Op::Query => Some(self.query),
            Op::Beat | Op::Reregister | Op::Subscribe => None,
        }
    }
}

impl Plan {
    /// Per phase that schedules anything at a rate: its planned and actual length,
    /// and per rate-driven operation the intended rate against what was written in it.
    pub fn phase_rates(&self, spans: &[Span], stats: &Stats) -> Vec<PhaseRates> {
        let mut out = Vec::new();
        for span in spans {
            let Some(step) = self.step(span.phase) else {
                continue;
            };
            let ops: Vec<PhaseOp> = Op::ALL
                .into_iter()
                .filter_map(|op| {
                    let rate = step.rates.of(op).filter(|r| *r > 0.0)?;
                    let sent = stats.op(op).sent_in[usize::from(span.phase.as_u8())];
                    Some(PhaseOp {
                        name: op.name().to_owned(),
                        intended_rate: rate,
                        achieved_rate: reports::report::rate(sent, span.secs()),
                    })
                })
                .collect();
            if !ops.is_empty() {
                out.push(PhaseRates {
                    phase: span.phase.name().to_owned(),
                    planned_s: step.duration.as_secs_f64(),
                    actual_s: span.secs(),
                    ops,
                });
            }
        }
        out
    }

    /// The rate the plan intended for `op` over `spans`: each phase's rate weighted by
    /// how long the phase actually took, so a phase that ran late does not lower its
    /// own target (`None` when `op` is not rate-driven).
    pub fn intended_rate(&self, spans: &[Span], op: Op) -> Option<f64> {
        let total: f64 = spans.iter().map(Span::secs).sum();
        let mut intended = 0.0;
        for span in spans {
            let rates = self.rates(span.phase);
            intended += rates.of(op)? * span.secs();
        }
        (total > 0.0).then(|| intended / total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_phase_reads_below_its_intended_rate() {
        let p = Profile::load("smoke").unwrap();
        let plan = Plan::from_profile(&p);
        let load_rate = plan.rates(Phase::Load).register;
        let planned = plan.step(Phase::Load).unwrap().duration.as_secs_f64();
        // The load phase took twice its planned length for the same registrations.
        let spans = [
            Span {
                phase: Phase::Load,
                start: 0,
                end: (2.0 * planned * SECOND as f64) as Nanos,
            },
            Span {
                phase: Phase::Settle,
                start: (2.0 * planned * SECOND as f64) as Nanos,
                end: (3.0 * planned * SECOND as f64) as Nanos,
            },
        ];
        let mut stats = Stats::default();
        stats.ops[Op::Register as usize].sent_in[Phase::Load.as_u8() as usize] =
            u64::from(p.fleet.instances);
        let rates = plan.phase_rates(&spans, &stats);
        assert_eq!(rates.len(), 1, "settling schedules nothing: {rates:?}");
        let load = &rates[0].ops[0];
        assert_eq!(
            (load.name.as_str(), load.intended_rate),
            ("register", load_rate)
        );
        assert!(
            (load.ratio() - 0.5).abs() < 0.01,
            "half the intended rate: {load:?}"
        );
        // Over the whole span the target is the load rate for two thirds of it.
        let target = plan.intended_rate(&spans, Op::Register).unwrap();
        assert!((target - load_rate * 2.0 / 3.0).abs() < 1e-6, "{target}");
        assert_eq!(plan.intended_rate(&spans, Op::Beat), None);
    }

    #[test]
    fn smoke_plan_shape() {
        let p = Profile::load("smoke").unwrap();
        let plan = Plan::from_profile(&p);
        let phases: Vec<_> = plan.steps.iter().map(|s| s.phase).collect();
        assert_eq!(
            phases,
            [
                Phase::Load,
                Phase::Steady,
                Phase::Settle,
                Phase::Drain,
                Phase::Final
            ]
        );
        assert_eq!(
            plan.step(Phase::Load).unwrap().duration,
            Duration::from_secs(2)
        );
        assert_eq!(plan.rates(Phase::Steady).query, 500.0);
        assert_eq!(plan.rates(Phase::Stop), Rates::default());
        let d = plan.expected_duration().as_secs_f64();
        assert!(
            (10.0..30.0).contains(&d),
            "smoke takes about 20 s, plan says {d}"
        );
        assert!(plan.describe().contains("steady"));
    }

    #[test]
    fn no_drain_and_phase_codes() {
        let mut p = Profile::load("smoke").unwrap();
        p.drain.enabled = false;
        let plan = Plan::from_profile(&p);
        assert!(plan.step(Phase::Drain).is_none());
        for ph in [
            Phase::Init,
            Phase::Load,
            Phase::Steady,
            Phase::Settle,
            Phase::Drain,
            Phase::Final,
            Phase::Stop,
        ] {
            assert_eq!(Phase::from_u8(ph.as_u8()), ph);
        }
        assert_eq!(Phase::from_u8(200), Phase::Stop);
    }
}
