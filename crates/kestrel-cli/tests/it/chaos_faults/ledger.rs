//! The ledger the instances write (`KESTREL_DEV_LEDGER`): each effect a demo tool or workflow
//! step had, read back and counted, and the threads' messages it is checked against.

use super::*;

/// One line of a ledger: a tool call's or a step's work, done.
#[derive(Debug, Clone)]
pub(super) struct Effect {
    pub(super) kind: String,
    pub(super) run: String,
    pub(super) id: String,
    pub(super) instance: String,
    pub(super) started: u64,
}

pub(super) fn read_ledgers(dir: &Path) -> Vec<Effect> {
    let mut effects = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            assert_eq!(fields.len(), 6, "a ledger line: {line:?}");
            effects.push(Effect {
                kind: fields[0].to_owned(),
                run: fields[1].to_owned(),
                id: fields[2].to_owned(),
                instance: fields[3].to_owned(),
                started: fields[4].parse().unwrap(),
            });
        }
    }
    effects
}

/// How many times each (kind, run, id) was done.
pub(super) fn counts(effects: &[Effect]) -> BTreeMap<(String, String, String), usize> {
    let mut counts = BTreeMap::new();
    for e in effects {
        *counts
            .entry((e.kind.clone(), e.run.clone(), e.id.clone()))
            .or_default() += 1;
    }
    counts
}

/// A whole turn of a conversation, by role: the question, the tool call, its result, the
/// answer.
pub(super) const TURN: [&str; 4] = ["user", "assistant", "tool", "assistant"];

pub(super) fn roles(messages: &[Value]) -> Vec<&str> {
    messages.iter().filter_map(|m| m["role"].as_str()).collect()
}

/// The stage of a `weather-report` step: a step of a later stage starts only after the
/// run's boundary past every earlier stage is stored.
pub(super) fn stage(step: &str) -> Option<u8> {
    match step {
        "forecast" => Some(0),
        "temperature" | "sky" => Some(1),
        "report" => Some(2),
        _ => None,
    }
}

/// The executions of workflow steps that started after a step of a later stage of the same
/// run had started: a step run again after its end was stored (never allowed).
pub(super) fn steps_run_after_their_boundary(effects: &[Effect]) -> Vec<(Effect, Effect)> {
    let mut by_run: BTreeMap<&str, Vec<&Effect>> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind == "step") {
        by_run.entry(&e.run).or_default().push(e);
    }
    let mut wrong = Vec::new();
    for steps in by_run.values() {
        for early in steps {
            for later in steps {
                if let (Some(a), Some(b)) = (stage(&early.id), stage(&later.id))
                    && a < b
                    && early.started > later.started
                {
                    wrong.push(((*early).clone(), (*later).clone()));
                }
            }
        }
    }
    wrong
}

/// The thread's messages (as an instance lists them).
pub(super) async fn thread_messages(live: &Live, agent: &str, thread: &str) -> Vec<Value> {
    let client = http(Duration::from_secs(30));
    for tick in 0.. {
        if let Some((_, base)) = live.pick(tick, None)
            && let Some((200, listed)) = answer(client.get(format!(
                "{base}/api/memory/threads/{thread}/messages?agentId={agent}&resourceId={RESOURCE}"
            )))
            .await
        {
            return crate::as_stored(listed["messages"].as_array().map_or(&[][..], Vec::as_slice));
        }
        assert!(tick < 50, "no instance lists thread {thread}");
        pause(200).await;
    }
    unreachable!()
}
