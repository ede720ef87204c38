//! `kestrel chat`: one answer, or an interactive conversation.
//!
//! The model comes from [`crate::model_choice`] and is resolved up front, so configuration
//! mistakes (unknown provider, missing API key) end the program with one line and exit code 2
//! before anything is sent. The embedded model (`local/smollm2`, the default) is pulled into the
//! model cache first if it is not there, with progress on stderr. Each answer is a streamed run of a tool-less agent whose events go
//! through a [`Renderer`]. In the conversation the history (user messages plus each run's
//! `response_messages`) is the input of the next run; a turn that fails or is stopped with
//! Ctrl-C is dropped from it.

use std::io::{self, Stderr, Stdout};
use std::process::ExitCode;

use kestrel::prelude::*;

use crate::cli::ChatArgs;
use crate::exit::{FAILURE, INTERRUPTED, USAGE, fail};
use crate::input::StdinLines;
use crate::interrupt::Interrupts;
use crate::model_choice::model_for_command;
use crate::render::{RenderOptions, Renderer};
use crate::terminal::Terminal;

/// The system prompt when `--instructions` is not given.
pub const DEFAULT_INSTRUCTIONS: &str = "You are a helpful assistant. Answer clearly and concisely.";

/// The id of the agent the chat runs.
const AGENT_ID: &str = "chat";

/// Runs `kestrel chat` and returns the exit code.
pub async fn run(args: ChatArgs) -> ExitCode {
    let spec = match model_for_command(args.model.as_deref()).await {
        Ok(spec) => spec,
        Err(code) => return code,
    };
    let agent = match build_agent(&spec, args.instructions.as_deref()) {
        Ok(agent) => agent,
        Err(message) => return fail(USAGE, message),
    };
    let terminal = Terminal::detect();
    let session = Session {
        agent,
        max_steps: args.max_steps,
        renderer: Renderer::new(
            io::stdout(),
            io::stderr(),
            RenderOptions::for_terminal(args.json, &terminal),
        ),
        interrupts: Interrupts::install(),
        interactive: terminal.stdin,
    };
    match args.prompt {
        Some(prompt) if prompt.trim().is_empty() => fail(USAGE, "the prompt is empty"),
        Some(prompt) => session.one_shot(prompt).await,
        None => session.conversation().await,
    }
}

/// The chat agent for the model string `spec`.
///
/// The model is resolved here rather than by the builder so that the error is the registry's own
/// message (it names the variable to set, or lists the known providers).
fn build_agent(spec: &str, instructions: Option<&str>) -> Result<Agent, String> {
    let registry = ModelRegistry::from_env();
    let model = registry.resolve(spec).map_err(|error| error.to_string())?;
    Agent::builder(AGENT_ID)
        .instructions(instructions.unwrap_or(DEFAULT_INSTRUCTIONS))
        .model(model)
        .registry(registry)
        .build()
        .map_err(|error| error.to_string())
}

/// How one answer ended.
enum Turn {
    /// The run finished; these are the messages it added to the conversation.
    Done(Vec<Message>),
    /// The run failed; the error was shown.
    Failed,
    /// The run was stopped with Ctrl-C.
    Stopped,
    /// Writing the output failed (e.g. the reader of a pipe went away); the run was stopped.
    OutputFailed(io::Error),
}

/// What a chat needs across turns.
struct Session {
    agent: Agent,
    max_steps: Option<u32>,
    renderer: Renderer<Stdout, Stderr>,
    interrupts: Interrupts,
    /// stdin is a terminal: show a prompt, and keep going after a failed turn.
    interactive: bool,
}

impl Session {
    /// Answers one prompt.
    async fn one_shot(mut self, prompt: String) -> ExitCode {
        match self.turn(vec![Message::user(prompt)]).await {
            Turn::Done(_) => ExitCode::SUCCESS,
            Turn::Failed => ExitCode::from(FAILURE),
            Turn::Stopped => ExitCode::from(INTERRUPTED),
            Turn::OutputFailed(error) => output_failed(&error),
        }
    }

    /// Reads messages from stdin, one per line, and answers each with the whole conversation as
    /// input. Ends at end of input, `/exit` or `/quit`, or Ctrl-C at the prompt.
    ///
    /// A failed turn ends the conversation with exit code 1 unless stdin is a terminal, where
    /// the person can try again.
    async fn conversation(mut self) -> ExitCode {
        let mut lines = StdinLines::spawn();
        let mut history: Vec<Message> = Vec::new();
        loop {
            // Presses that arrived while an answer was being stopped do not count here.
            self.interrupts.clear();
            if self.interactive
                && let Err(error) = self.renderer.prompt("> ")
            {
                return output_failed(&error);
            }
            let line = tokio::select! {
                line = lines.next_line() => line,
                Some(()) = self.interrupts.recv() => {
                    let _ = self.renderer.prompt("\n");
                    return ExitCode::from(INTERRUPTED);
                }
            };
            let line = match line {
                None => {
                    if self.interactive {
                        let _ = self.renderer.prompt("\n");
                    }
                    return ExitCode::SUCCESS;
                }
                Some(Err(error)) => return fail(FAILURE, format!("cannot read stdin: {error}")),
                Some(Ok(line)) => line,
            };
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            if matches!(text, "/exit" | "/quit") {
                return ExitCode::SUCCESS;
            }
            history.push(Message::user(text));
            match self.turn(history.clone()).await {
                Turn::Done(messages) => history.extend(messages),
                Turn::Stopped => {
                    history.pop();
                }
                Turn::Failed => {
                    history.pop();
                    if !self.interactive {
                        return ExitCode::from(FAILURE);
                    }
                }
                Turn::OutputFailed(error) => return output_failed(&error),
            }
        }
    }

    /// Streams one run with `input`, showing its events; Ctrl-C stops it.
    async fn turn(&mut self, input: Vec<Message>) -> Turn {
        let abort = AbortSignal::new();
        let mut options = RunOptions::new().abort_signal(abort.clone());
        if let Some(max_steps) = self.max_steps {
            options = options.max_steps(max_steps);
        }
        self.renderer.begin_run();
        let mut stream = self.agent.stream(input).options(options).into_stream();
        let mut output_error = None;
        let mut stopping = false;
        loop {
            tokio::select! {
                event = stream.next_event() => {
                    let Some(event) = event else { break };
                    if let Err(error) = self.renderer.event(&event) {
                        abort.abort();
                        output_error = Some(error);
                        break;
                    }
                }
                Some(()) = self.interrupts.recv(), if !stopping => {
                    // The run ends with an `abort` event, which the loop still shows.
                    stopping = true;
                    abort.abort();
                }
            }
        }
        let result = stream.result().await;
        if let Some(error) = output_error {
            return Turn::OutputFailed(error);
        }
        match result {
            Ok(result) => Turn::Done(result.response_messages),
            Err(AgentError::Aborted { .. }) => Turn::Stopped,
            Err(error) => {
                // Runs report failures as an `error` event; this covers any that did not.
                if !self.renderer.saw_error() {
                    let _ = self.renderer.error_line(&error.to_string());
                }
                Turn::Failed
            }
        }
    }
}

/// The exit code after a failed write to stdout. A closed pipe (`kestrel chat … | head`) is
/// not worth a message.
fn output_failed(error: &io::Error) -> ExitCode {
    if error.kind() == io::ErrorKind::BrokenPipe {
        ExitCode::from(FAILURE)
    } else {
        fail(FAILURE, format!("cannot write the output: {error}"))
    }
}
