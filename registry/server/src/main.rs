//! `registry`: the Nacos-1.x-compatible naming server, `registry users`
//! to manage the `--auth-users` file, and `registry config print` to show
//! the effective configuration.

use std::ffi::OsString;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use registry_server::config::file::{self, LoadError, Loaded};
use registry_server::{run_app, shutdown, users, App, Config, Listeners};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start (before `main`): its extents and
/// metadata on transparent huge pages. A beat walks ~6 dependent cache
/// misses through a fleet of millions of snapshots, and each one's page walk
/// missed the TLB too: at twice `nacos-1x-report` (2.2M instances) the
/// registry's CPU fell from 172 s to 114 s and its beat p99 from 8 s to
/// 0.3 s, for 4 % more peak memory at 1× (363 → 377 MiB). The kernel's THP
/// setting still rules (`madvise` or `always` lets it work), and
/// `_RJEM_MALLOC_CONF` overrides it, e.g. `thp:default`.
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &[u8; 31] = b"thp:always,metadata_thp:always\0";

/// Without a subcommand: serve (the flags below). `registry users ...`
/// edits a users file.
#[derive(Parser)]
#[command(
    name = "registry",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    config: Config,
}

#[derive(Subcommand)]
enum Command {
    /// Add or remove users of the `--auth-users` file.
    Users {
        #[command(subcommand)]
        action: UsersAction,
    },
    /// Add or remove a member of a running cluster (through any member's
    /// HTTP API; it needs `--data-dir` on every member).
    Members {
        #[command(subcommand)]
        action: MembersAction,
        /// A running member's HTTP address.
        #[arg(
            long,
            env = "REGISTRY_SERVER",
            default_value = "127.0.0.1:8848",
            global = true
        )]
        server: String,
        /// User to log in as when the cluster runs with `--auth-users`; the
        /// password is read as for `registry users add`.
        #[arg(long, env = "REGISTRY_USERNAME", global = true)]
        username: Option<String>,
        /// Longest wait for the change, in seconds (an added node must
        /// catch up first).
        #[arg(long, default_value_t = 120, global = true)]
        timeout_secs: u64,
    },
    /// Show the configuration.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
}

#[derive(Subcommand)]
enum MembersAction {
    /// Add the node at ADDR (started with `--cluster-join`): a learner
    /// until it has caught up, then a voter.
    Add {
        /// Its HTTP address as the members name it (`ip:port`).
        addr: String,
    },
    /// Remove the member at ADDR (alive or dead).
    Remove {
        /// Its HTTP address as the members name it (`ip:port`).
        addr: String,
    },
}

#[derive(Subcommand)]
enum ConfigAction {
    /// Print the effective configuration as a TOML file, each setting
    /// commented with where it came from (flag, env, file, default). Takes
    /// the server's flags (`--config FILE`, ...) and reads its variables.
    Print {
        /// The server's flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        flags: Vec<OsString>,
    },
}

#[derive(Subcommand)]
enum UsersAction {
    /// Add a user, or set a new password for an existing one. The password
    /// is read from the terminal without echo (twice), or as one line from
    /// standard input when that is not a terminal.
    Add {
        /// User name: 1-64 characters of A-Z a-z 0-9 _ . @ -.
        name: String,
        /// The users file (created, mode 0600, if missing).
        #[arg(long, env = "REGISTRY_AUTH_USERS")]
        file: PathBuf,
        /// PBKDF2-HMAC-SHA256 iterations of the hash.
        #[arg(long, default_value_t = users::DEFAULT_ITERATIONS,
              value_parser = clap::value_parser!(u32).range(i64::from(registry_server::auth::MIN_ITERATIONS)..))]
        iterations: u32,
    },
    /// Remove a user.
    Remove {
        /// User name.
        name: String,
        /// The users file.
        #[arg(long, env = "REGISTRY_AUTH_USERS")]
        file: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Users { action }) => {
            if let Err(e) = manage_users(action) {
                eprintln!("registry users: {e:#}");
                std::process::exit(1);
            }
            Ok(())
        }
        Some(Command::Members {
            action,
            server,
            username,
            timeout_secs,
        }) => {
            if let Err(e) = change_members(action, &server, username, timeout_secs) {
                eprintln!("registry members: {e:#}");
                std::process::exit(1);
            }
            Ok(())
        }
        Some(Command::Config {
            action: ConfigAction::Print { flags },
        }) => {
            let args = std::iter::once(OsString::from("registry")).chain(flags);
            let loaded = load_or_exit(args);
            print!("{}", loaded.render());
            Ok(())
        }
        None => {
            // Parsed again with the file merged in: flags and variables
            // win over it (the first parse only dispatched).
            let _ = cli.config;
            serve(load_or_exit(std::env::args_os()))
        }
    }
}

/// The merged configuration, validated; a bad one exits with status 2
/// naming the flag, or the file key, and the reason.
fn load_or_exit(args: impl IntoIterator<Item = OsString>) -> Loaded {
    let loaded = match file::load(args) {
        Ok(l) => l,
        Err(LoadError::Args(e)) => e.exit(),
        Err(LoadError::File(m)) => {
            eprintln!("registry: {m}");
            std::process::exit(2);
        }
    };
    if let Err(e) = loaded.config.validate() {
        let keys = loaded.file_keys_named_in(&e);
        match (&loaded.config.config_file, keys.is_empty()) {
            (Some(f), false) => eprintln!(
                "registry: {e} (set in {} as {})",
                f.display(),
                keys.join(", ")
            ),
            _ => eprintln!("registry: {e}"),
        }
        std::process::exit(2);
    }
    loaded
}

fn serve(loaded: Loaded) -> anyhow::Result<()> {
    let config: Config = loaded.config;
    init_tracing(&config.log_format);
    let listeners = Listeners::bind(&config)?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if config.workers > 0 {
        runtime.worker_threads(config.workers);
    }
    let runtime = runtime.enable_all().build()?;
    // Loads the data directory before anything is served; connections
    // arriving meanwhile wait in the listen backlog.
    let app = Arc::new(App::new(config)?);
    // Printed (not logged) so scripts starting on port 0 can read it; it
    // also says the persistent state is loaded.
    // Every other door that is on, in `DOORS`' order: `udp …, grpc …, dns …`.
    let others: Vec<String> = listeners
        .addrs()
        .filter(|(name, _)| *name != "http")
        .map(|(name, addr)| format!("{name} {addr}"))
        .collect();
    println!(
        "registry listening on http://{} ({})",
        listeners.http_addr(),
        others.join(", ")
    );
    // Installed before anything is served (see `shutdown::signal`).
    let stop = {
        let _runtime = runtime.enter();
        shutdown::signal()
    };
    runtime.block_on(run_app(app, listeners, stop))
}

fn manage_users(action: UsersAction) -> anyhow::Result<()> {
    match action {
        UsersAction::Add {
            name,
            file,
            iterations,
        } => {
            let password = read_password()?;
            let added = users::add(&file, &name, &password, iterations)?;
            let what = match added {
                users::Added::Created => "added",
                users::Added::Replaced => "password changed for",
            };
            println!("{what} user {name} in {}", file.display());
        }
        UsersAction::Remove { name, file } => {
            let left = users::remove(&file, &name)?;
            println!("removed user {name} from {}", file.display());
            if left == 0 {
                eprintln!(
                    "note: {} has no users left; a server started with --auth-users on it refuses to start",
                    file.display()
                );
            }
        }
    }
    Ok(())
}

/// `registry members add|remove ADDR`: prints the membership after the
/// change, or fails with the server's reason.
fn change_members(
    action: MembersAction,
    server: &str,
    username: Option<String>,
    timeout_secs: u64,
) -> anyhow::Result<()> {
    let credentials = match username {
        Some(u) => Some((u, read_password()?)),
        None => None,
    };
    let target = registry_server::admin::Target::new(
        server,
        credentials,
        std::time::Duration::from_secs(timeout_secs.max(1)),
    );
    let (method, addr) = match &action {
        MembersAction::Add { addr } => ("POST", addr),
        MembersAction::Remove { addr } => ("DELETE", addr),
    };
    let query = format!("address={}", registry_server::admin::encode(addr));
    let a = target.call(method, "/nacos/v1/core/cluster/member", &query)?;
    anyhow::ensure!(a.status == 200, "{} {}", a.status, a.body.trim());
    println!("{}", a.body);
    Ok(())
}

/// The password: typed twice without echo on a terminal, else the first
/// line of standard input (for scripts).
fn read_password() -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin
            .lock()
            .read_line(&mut line)
            .context("reading the password from standard input")?;
        return Ok(line.trim_end_matches(['\n', '\r']).to_owned());
    }
    let first = prompt_hidden("Password: ")?;
    let second = prompt_hidden("Again: ")?;
    anyhow::ensure!(first == second, "the two passwords differ");
    Ok(first)
}

/// Reads one line from the terminal with echo off, restoring it after.
fn prompt_hidden(prompt: &str) -> anyhow::Result<String> {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    let stdin = std::io::stdin();
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    let saved = tcgetattr(&stdin).context("reading the terminal settings")?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    quiet.local_flags.insert(LocalFlags::ECHONL);
    tcsetattr(&stdin, SetArg::TCSANOW, &quiet).context("turning echo off")?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let _ = tcsetattr(&stdin, SetArg::TCSANOW, &saved);
    read.context("reading the password")?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}

fn init_tracing(format: &str) {
    // openraft narrates every vote and replication step at info.
    const DEFAULT: &str = "info,openraft=warn";
    let directives = std::env::var("REGISTRY_LOG")
        .ok()
        .filter(|d| tracing_subscriber::EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| DEFAULT.to_owned());
    let filter = tracing_subscriber::EnvFilter::new(&directives);
    // Reloadable, so `PUT /v3/admin/ns/ops/log` can change levels (the
    // formatter is chosen before the reload layer, which names its type).
    if format == "json" {
        let builder = tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_filter_reloading();
        let handle = builder.reload_handle();
        registry_server::log_levels::install(&directives, move |f| {
            handle.reload(f).map_err(|e| e.to_string())
        });
        builder.init();
    } else {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_filter_reloading();
        let handle = builder.reload_handle();
        registry_server::log_levels::install(&directives, move |f| {
            handle.reload(f).map_err(|e| e.to_string())
        });
        builder.init();
    }
}
