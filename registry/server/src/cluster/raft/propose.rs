//! The proposer: turns queued client writes into few, large log entries.
//!
//! It takes every write waiting (at most [`MAX_COMMANDS`], and at most the
//! entry byte bound) into one entry and proposes it, with at most
//! [`IN_FLIGHT`] entries waiting for their commit at once. While they wait,
//! new writes queue up and form the next, larger entry: under load the
//! entry size grows instead of the number of fsyncs and round trips.
//! Each write's waiter gets its own command's outcome, or an error when the
//! entry could not be committed in time (then it was not acknowledged; it
//! may still commit later, as with any timed-out request).

use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use openraft::Raft;
use registry_proto::raft::{Batch, NodeId, TypeConfig};
use tokio::sync::{mpsc, Semaphore};

use super::{Proposal, Shared};

/// Most commands in one entry.
const MAX_COMMANDS: usize = 1_024;
/// Entries waiting for their commit at once.
const IN_FLIGHT: usize = 4;

pub(super) async fn run(
    raft: Raft<TypeConfig>,
    mut queue: mpsc::Receiver<Proposal>,
    shared: Arc<Shared>,
    timeout: Duration,
    max_entry: usize,
) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut waiting: Vec<Proposal> = Vec::new();
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        if waiting.is_empty() && queue.recv_many(&mut waiting, MAX_COMMANDS).await == 0 {
            return;
        }
        while waiting.len() < MAX_COMMANDS {
            match queue.try_recv() {
                Ok(p) => waiting.push(p),
                Err(_) => break,
            }
        }
        // The longest prefix within the byte bound (at least one command).
        let mut bytes = 0;
        let mut take = 0;
        for p in &waiting {
            if take > 0 && bytes + p.weight > max_entry {
                break;
            }
            bytes += p.weight;
            take += 1;
        }
        let batch: Vec<Proposal> = waiting.drain(..take).collect();
        let raft = raft.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let _slot = slot;
            commit(&raft, &shared, batch, timeout).await;
        });
    }
}

async fn commit(raft: &Raft<TypeConfig>, shared: &Shared, batch: Vec<Proposal>, timeout: Duration) {
    let started = Instant::now();
    let (commands, waiters): (Vec<_>, Vec<_>) =
        batch.into_iter().map(|p| (p.command, p.done)).unzip();
    let n = commands.len();
    shared.stats.proposals.inc();
    let result = tokio::time::timeout(timeout, raft.client_write(Batch(commands))).await;
    let failure = match result {
        Ok(Ok(response)) => {
            shared
                .stats
                .commit_latency
                .record_duration(started.elapsed());
            shared.stats.committed.add(n as u64);
            let mut outcomes = response.data.0.into_iter();
            for done in waiters {
                let outcome = outcomes.next().ok_or_else(|| {
                    "the entry was applied without an outcome for this write".to_owned()
                });
                let _ = done.send(outcome);
            }
            return;
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => format!(
            "this node is no longer the Raft leader{}; the write was not applied, please retry",
            leader_text(f.leader_id)
        ),
        Ok(Err(e)) => format!("the write could not be committed: {e}"),
        Err(_) => format!(
            "the write was not committed within {} ms: a majority of the cluster is unreachable; \
             it was not acknowledged",
            timeout.as_millis()
        ),
    };
    shared.stats.refused.add(n as u64);
    for done in waiters {
        let _ = done.send(Err(failure.clone()));
    }
}

fn leader_text(leader: Option<NodeId>) -> String {
    match leader {
        Some(id) => format!(" (node {id} is)"),
        None => String::new(),
    }
}
