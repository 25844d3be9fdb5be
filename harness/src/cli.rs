//! Command-line interface: one subcommand per plugin kind, plus `list`, `explain`, `report` and
//! `completions`. Every flag can also come from a `NOMAD_CONFORM_<FLAG>` environment variable
//! or from `nomad-conform.toml` (see [`crate::config`]); the command line wins over the
//! environment, which wins over the file.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The lock suite's variable path when `--path` is not given.
pub const DEFAULT_LOCK_PATH: &str = "nomad/jobs/conform/lock";

#[derive(Debug, Parser)]
#[command(
    name = "nomad-conform",
    version,
    about = "Conformance tests for HashiCorp Nomad plugins: will Nomad get along with my plugin?",
    long_about = None,
    after_help = "Exit status: 0 every MUST clause passed; 1 a MUST clause failed; 2 usage or \
                  configuration error; 3 the harness failed or nothing could be tested; \
                  130 interrupted.\n\
                  Settings come from flags, then NOMAD_CONFORM_* environment variables, then \
                  nomad-conform.toml (or --config FILE)."
)]
pub struct Cli {
    /// Read settings from FILE instead of ./nomad-conform.toml.
    #[arg(long, global = true, value_name = "FILE", env = "NOMAD_CONFORM_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print only the final verdict.
    #[arg(
        long,
        short,
        global = true,
        env = "NOMAD_CONFORM_QUIET",
        conflicts_with = "verbose"
    )]
    pub quiet: bool,
    /// Print every call of every failing clause at the end of the run.
    #[arg(long, short, global = true, env = "NOMAD_CONFORM_VERBOSE")]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Test a dynamic host volume plugin (an executable called with fingerprint/create/delete).
    Dhv(Box<DhvArgs>),
    /// Test a CSI plugin over its unix socket, the way Nomad drives CSI plugins.
    Csi(Box<CsiArgs>),
    /// Test a task driver plugin binary the way the Nomad client loads and drives it.
    Driver(Box<DriverArgs>),
    /// Test a singleton lock client (a shim or a sidecar holding a Nomad Variables lock).
    Lock(Box<LockArgs>),
    /// Check a Variables server (the reference one, or a real Nomad) against Nomad's
    /// Variables, lock and ACL rules.
    Variables(Box<VariablesArgs>),
    /// List the clauses of a suite: ID, level and title.
    List(ListArgs),
    /// Explain one clause: its text, level and basis, the reference plugin's file that answers
    /// it correctly, and the command that runs only that clause against that plugin.
    Explain(ExplainArgs),
    /// Render reports again from saved run records, or merge the records of shards into one.
    Report(ReportArgs),
    /// Certify a fleet with Nomad: collect what the conform-fleet job found on every node.
    Fleet(FleetArgs),
    /// Print a shell completion script.
    Completions(CompletionArgs),
    /// The protected process of a lock client under test: reports to the harness (internal).
    #[command(hide = true)]
    Probe(crate::plugins::lock::probe::ProbeArgs),
    /// Print the man page (roff), or write every command's page to a directory (packaging).
    #[command(hide = true)]
    Manpage {
        /// Write nomad-conform.1 and nomad-conform-COMMAND.1 for every command to DIR.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// Where reports go; shared by the suites and `report`.
#[derive(Debug, Args, Clone, Default)]
pub struct ReportFiles {
    /// Write a JUnit XML report to FILE.
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_JUNIT")]
    pub junit: Option<PathBuf>,
    /// Write a self-contained HTML report to FILE.
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_HTML")]
    pub html: Option<PathBuf>,
    /// Write the run record as JSON to FILE (re-render it later with `report`).
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_JSON")]
    pub json: Option<PathBuf>,
}

/// Flags every suite takes.
#[derive(Debug, Args)]
pub struct SuiteArgs {
    #[command(flatten)]
    pub reports: ReportFiles,
    /// Run only clauses matching a tag expression, e.g. '@must and not @DHV-CREATE-RESTORE'.
    #[arg(long, value_name = "EXPR", env = "NOMAD_CONFORM_TAGS")]
    pub tags: Option<String>,
    /// Run only shard M of N (1-based), split by clause ID; merge the records with `report --merge`.
    #[arg(long, value_name = "M/N", env = "NOMAD_CONFORM_SHARD")]
    pub shard: Option<String>,
    /// Seed for every generated input; printed by every run, so a run can be repeated.
    #[arg(long, value_name = "N", env = "NOMAD_CONFORM_SEED", allow_negative_numbers = true, value_parser = seed)]
    pub seed: Option<u64>,
    /// How many clauses run at the same time.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 8,
        env = "NOMAD_CONFORM_JOBS",
        allow_negative_numbers = true,
        value_parser = at_least_one::<usize>
    )]
    pub jobs: usize,
    /// Run the feature files in DIR instead of the built-in specs.
    #[arg(long, value_name = "DIR", env = "NOMAD_CONFORM_SPECS")]
    pub specs: Option<PathBuf>,
    /// Contract profile: a built-in name (nomad-1.10) or a TOML file laid over it.
    #[arg(long, value_name = "NAME|FILE", env = "NOMAD_CONFORM_PROFILE")]
    pub profile: Option<PathBuf>,
    /// Count SHOULD failures as failures (exit status 1).
    #[arg(long, env = "NOMAD_CONFORM_STRICT")]
    pub strict: bool,
    /// A TOML list of known failures ([[known-failure]] with clause, reason and optionally
    /// link, plugin-version and expires): their failures are shown as known and do not count.
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_KNOWN_FAILURES")]
    pub known_failures: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DriverArgs {
    /// The driver plugin binary, as it would sit in the agent's plugin_dir.
    #[arg(env = "NOMAD_CONFORM_PLUGIN")]
    pub plugin: PathBuf,
    /// Arguments for the plugin, as `plugin "x" { args = [...] }` gives them (one shell-quoted
    /// string).
    #[arg(
        long,
        value_name = "ARGS",
        allow_hyphen_values = true,
        env = "NOMAD_CONFORM_PLUGIN_ARGS"
    )]
    pub plugin_args: Option<String>,
    /// The plugin's configuration: the body of the agent's `plugin "x" { config { ... } }`, as
    /// HCL, or JSON in a `.json` file. Default: none (`{}`), as on an agent without the block.
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_PLUGIN_CONFIG")]
    pub plugin_config: Option<PathBuf>,
    /// Task configurations by shape (long, exit, output, trap, stubborn): HCL
    /// `shape "long" { config { ... } }` blocks, or TOML `[shape.long.config]` tables.
    #[arg(
        long,
        value_name = "FILE",
        env = "NOMAD_CONFORM_TASKS",
        conflicts_with = "task_command"
    )]
    pub tasks: Option<PathBuf>,
    /// For drivers that run a command: the body of a task's `config {}` with `{command}` and
    /// `{args}` placeholders (`command = {command}\nargs = {args}`); every shape is made from
    /// a `/bin/sh -c` snippet.
    #[arg(long, value_name = "TEMPLATE", env = "NOMAD_CONFORM_TASK_COMMAND")]
    pub task_command: Option<String>,
    /// For a driver with chroot isolation: the client's `chroot_env`, the host paths the task's
    /// root filesystem is made of, as `SRC[:DST],...` (default: Nomad's, /bin /etc /lib /lib32
    /// /lib64 /run/resolvconf /sbin /usr /run/systemd/resolve).
    #[arg(long, value_name = "SRC[:DST],...", env = "NOMAD_CONFORM_CHROOT_ENV")]
    pub chroot_env: Option<String>,
    #[command(flatten)]
    pub suite: SuiteArgs,
}

#[derive(Debug, Args)]
pub struct LockArgs {
    /// Shim pattern: the client's command line, split into words and run directly as a task's
    /// `command` and `args` (a line with shell operators or `$` runs under `/bin/sh -c`);
    /// `{protected}` becomes the protected process, `{path}` the lock's variable path.
    #[arg(
        long,
        value_name = "CMD",
        env = "NOMAD_CONFORM_CLIENT",
        required_unless_present = "sidecar",
        conflicts_with = "sidecar"
    )]
    pub client: Option<String>,
    /// Sidecar pattern: the leader task's command line (`{path}`, `{sentinel}`), run as `--client`
    /// is; the harness starts the application once the sentinel file exists and stops it when
    /// the leader exits.
    #[arg(long, value_name = "CMD", env = "NOMAD_CONFORM_SIDECAR")]
    pub sidecar: Option<String>,
    /// The sentinel file's name, in each client's own allocation directory (`{sentinel}` is
    /// its full path).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "lock-held",
        env = "NOMAD_CONFORM_SENTINEL"
    )]
    pub sentinel: String,
    /// The variable path the lock lives at.
    #[arg(
        long,
        value_name = "PATH",
        default_value = DEFAULT_LOCK_PATH,
        env = "NOMAD_CONFORM_PATH"
    )]
    pub path: String,
    /// With --nomad-addr: run against a real Nomad agent (the fault-injecting proxy sits in
    /// front of it) instead of the reference Variables server; clauses that need to control
    /// the server are skipped. The token is given to the clients as NOMAD_TOKEN, the
    /// namespace and region as NOMAD_NAMESPACE and NOMAD_REGION.
    #[command(flatten)]
    pub api: NomadApiArgs,
    /// Give clients the API as the Task API socket (NOMAD_UNIX_ADDR) instead of NOMAD_ADDR.
    #[arg(long, env = "NOMAD_CONFORM_TASK_API")]
    pub task_api: bool,
    /// Sidecar pattern: the application task's kill_timeout (default: the profile's).
    #[arg(long, value_name = "DURATION", env = "NOMAD_CONFORM_KILL_TIMEOUT")]
    pub kill_timeout: Option<String>,
    /// How long the client waits for the lock before it gives up, as it is configured;
    /// without it LOCK-GIVES-UP is skipped.
    #[arg(long, value_name = "DURATION", env = "NOMAD_CONFORM_GIVE_UP")]
    pub give_up: Option<String>,
    /// The group's disconnect.stop_on_client_after, for the timing advice.
    #[arg(
        long,
        value_name = "DURATION",
        env = "NOMAD_CONFORM_STOP_ON_CLIENT_AFTER"
    )]
    pub stop_on_client_after: Option<String>,
    /// Clients in the singleton campaign (default: the profile's).
    #[arg(
        long,
        value_name = "N",
        env = "NOMAD_CONFORM_CLIENTS",
        allow_negative_numbers = true,
        value_parser = at_least_one::<usize>
    )]
    pub clients: Option<usize>,
    /// The least the singleton campaign lasts (a soak: --campaign 10m); by default it lasts as
    /// long as its scheduled faults need, sized from the clients' TTL and lock delay.
    #[arg(long, value_name = "DURATION", env = "NOMAD_CONFORM_CAMPAIGN")]
    pub campaign: Option<String>,
    #[command(flatten)]
    pub suite: SuiteArgs,
}

#[derive(Debug, Args)]
pub struct VariablesArgs {
    /// With --nomad-addr: check a real Nomad agent instead of the reference Variables
    /// server; its token must be a management token (the ACL scenarios create policies and
    /// tokens).
    #[command(flatten)]
    pub api: NomadApiArgs,
    #[command(flatten)]
    pub suite: SuiteArgs,
}

#[derive(Debug, Args)]
pub struct DhvArgs {
    /// The plugin executable, as it would sit in Nomad's host_volume_plugin_dir (or give
    /// --plugin-dir instead).
    #[arg(env = "NOMAD_CONFORM_PLUGIN")]
    pub plugin: Option<PathBuf>,
    /// Test every plugin in DIR, one run each, as the Nomad client finds them in its
    /// host_volume_plugin_dir: every entry that is not a directory and has an execute bit
    /// (hidden files too; symlinks that stay inside DIR), sorted by name.
    #[arg(long, value_name = "DIR", env = "NOMAD_CONFORM_PLUGIN_DIR")]
    pub plugin_dir: Option<PathBuf>,
    /// With --plugin-dir: write each plugin's reports into DIR as <plugin>.json, <plugin>.xml
    /// and <plugin>.html (made if missing). --json, --junit and --html name one plugin's files.
    #[arg(long, value_name = "DIR", env = "NOMAD_CONFORM_OUT_DIR")]
    pub out_dir: Option<PathBuf>,
    /// Directory to make volumes directories in (DHV_VOLUMES_DIR of each clause is a new
    /// directory inside it). Default: the system temporary directory.
    #[arg(long, value_name = "DIR", env = "NOMAD_CONFORM_VOLUMES_DIR")]
    pub volumes_dir: Option<PathBuf>,
    /// DHV_PARAMETERS for the volumes the suite creates: a JSON object of strings, or null.
    /// Values of keys that look secret (password, token, ...) are redacted in reports.
    #[arg(long, value_name = "JSON", env = "NOMAD_CONFORM_PARAMETERS")]
    pub parameters: Option<String>,
    /// Parameters the plugin refuses, used to provoke a failed create.
    #[arg(long, value_name = "JSON", env = "NOMAD_CONFORM_FAILING_PARAMETERS")]
    pub failing_parameters: Option<String>,
    /// DHV_CAPACITY_MIN_BYTES for the volumes the suite creates (e.g. 10MiB, 50MB, 1048576).
    #[arg(long, value_name = "BYTES", env = "NOMAD_CONFORM_CAPACITY_MIN")]
    pub capacity_min: Option<String>,
    /// DHV_CAPACITY_MAX_BYTES for the volumes the suite creates.
    #[arg(long, value_name = "BYTES", env = "NOMAD_CONFORM_CAPACITY_MAX")]
    pub capacity_max: Option<String>,
    /// Pass the harness's own environment to the plugin as well (Nomad passes only DHV_*).
    #[arg(long, env = "NOMAD_CONFORM_INHERIT_ENV")]
    pub inherit_env: bool,
    /// Bytes of stdout and stderr kept per call, the two together (head and tail of each); the
    /// rest is counted and dropped. Past 256KiB a call keeps them in an unnamed temporary file
    /// ($TMPDIR, else /var/tmp) rather than in memory. From 1KiB to 1GiB.
    #[arg(
        long,
        value_name = "BYTES",
        default_value = "1MiB",
        env = "NOMAD_CONFORM_CAPTURE_LIMIT"
    )]
    pub capture_limit: String,
    /// How many generated volumes DHV-GENERAL-GENERATED-INPUTS tries.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 16,
        env = "NOMAD_CONFORM_PROPERTY_CASES",
        allow_negative_numbers = true,
        value_parser = at_least_one::<u32>
    )]
    pub property_cases: u32,
    #[command(flatten)]
    pub suite: SuiteArgs,
}

#[derive(Debug, Args)]
pub struct CsiArgs {
    /// The plugin's socket, e.g. unix:///var/nomad/csi/plugins/ID/csi.sock (the node plugin, or
    /// a monolith).
    #[arg(long, value_name = "unix:///PATH", env = "NOMAD_CONFORM_ENDPOINT")]
    pub endpoint: Option<String>,
    /// The controller plugin's socket, when controller and node run separately.
    #[arg(
        long,
        value_name = "unix:///PATH",
        env = "NOMAD_CONFORM_CONTROLLER_ENDPOINT"
    )]
    pub controller_endpoint: Option<String>,
    /// What the plugin is, as its job declares it (`csi_plugin { type = ... }`): Nomad calls
    /// controller RPCs only on controller and monolith plugins, node RPCs only on node and
    /// monolith plugins. Default: monolith, or controller when only --controller-endpoint is given.
    #[arg(
        long,
        value_enum,
        value_name = "TYPE",
        env = "NOMAD_CONFORM_PLUGIN_TYPE"
    )]
    pub plugin_type: Option<PluginType>,
    /// An existing volume to claim, as `nomad volume register` knows it: its external ID,
    /// optionally followed by a comma and its volume context as a JSON object of strings
    /// (`vol-1,{"server":"10.0.0.2"}`). For node-only runs, and for plugins whose controller
    /// cannot create volumes (no CREATE_DELETE_VOLUME). Repeat for more volumes; clauses take
    /// one each.
    #[arg(
        long = "volume",
        value_name = "ID[,CONTEXT]",
        env = "NOMAD_CONFORM_VOLUME"
    )]
    pub volumes: Vec<String>,
    /// The node ID a controller-only run publishes to (what the node plugin's NodeGetInfo
    /// reports on the node); without it, clauses that publish are skipped.
    #[arg(long, value_name = "ID", env = "NOMAD_CONFORM_NODE_ID")]
    pub node_id: Option<String>,
    /// Start the plugin with this command line, wait for its socket, stop it at the end. It may
    /// use {endpoint}, {socket} and {state_dir}; the plugin also gets CSI_ENDPOINT.
    #[arg(long, value_name = "CMD", env = "NOMAD_CONFORM_LAUNCH")]
    pub launch: Option<String>,
    /// Where to make Nomad's staging and per-allocation directories (stage_publish_base_dir).
    /// Default: a directory per clause under the system temporary directory.
    #[arg(long, value_name = "DIR", env = "NOMAD_CONFORM_MOUNT_DIR")]
    pub mount_dir: Option<PathBuf>,
    /// Capacity of the volumes the suite creates.
    #[arg(long, value_name = "BYTES", env = "NOMAD_CONFORM_TEST_VOLUME_SIZE")]
    pub test_volume_size: Option<String>,
    /// The file system type of file-system volumes, as the volume specification's
    /// `mount_options { fs_type = ... }`: sent in every volume capability Nomad sends it in
    /// (CreateVolume, ValidateVolumeCapabilities, ControllerPublishVolume, NodeStageVolume,
    /// NodePublishVolume).
    #[arg(long, value_name = "TYPE", env = "NOMAD_CONFORM_MOUNT_FS_TYPE")]
    pub mount_fs_type: Option<String>,
    /// A mount flag of file-system volumes, as `mount_options { mount_flags = [...] }`;
    /// repeat for more. Sent wherever --mount-fs-type is.
    #[arg(
        long = "mount-flags",
        value_name = "FLAG",
        env = "NOMAD_CONFORM_MOUNT_FLAGS"
    )]
    pub mount_flags: Vec<String>,
    /// CreateVolume parameters: a JSON file holding an object of strings.
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_VOLUME_PARAMETERS")]
    pub volume_parameters: Option<PathBuf>,
    /// CreateSnapshot parameters: a JSON file holding an object of strings.
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_SNAPSHOT_PARAMETERS")]
    pub snapshot_parameters: Option<PathBuf>,
    /// Secrets sent with every call that carries secrets: a JSON file holding an object of
    /// strings. Their values are redacted in every report.
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_SECRETS")]
    pub secrets: Option<PathBuf>,
    /// Mutable parameters the plugin supports, as a JSON object of strings (for
    /// CSI-MODIFY-VOLUME).
    #[arg(long, value_name = "JSON", env = "NOMAD_CONFORM_MUTABLE_PARAMETERS")]
    pub mutable_parameters: Option<String>,
    /// Rounds of the full lifecycle in CSI-NOMAD-REPEATED-LIFECYCLE.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 2,
        env = "NOMAD_CONFORM_IDEMPOTENCY_COUNT",
        allow_negative_numbers = true,
        value_parser = at_least_one::<u32>
    )]
    pub idempotency_count: u32,
    #[command(flatten)]
    pub suite: SuiteArgs,
}

/// `csi_plugin { type = ... }` in a Nomad job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum PluginType {
    /// Controller and node services in one plugin.
    #[default]
    Monolith,
    /// The node service only (one instance per client node).
    Node,
    /// The controller service only.
    Controller,
}

impl PluginType {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginType::Monolith => "monolith",
            PluginType::Node => "node",
            PluginType::Controller => "controller",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum ListFormat {
    #[default]
    Text,
    Json,
    /// The clause reference page (docs/clauses/<kind>.md).
    Markdown,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The suite: dhv, csi, driver, lock or variables.
    #[arg(value_parser = ["dhv", "csi", "driver", "lock", "variables"])]
    pub kind: String,
    /// List the feature files in DIR instead of the built-in specs.
    #[arg(long, value_name = "DIR")]
    pub specs: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Text)]
    pub format: ListFormat,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The clause ID, e.g. CSI-NODE-PUBLISH-IDEMPOTENT (any suite; case does not matter).
    #[arg(value_name = "CLAUSE-ID")]
    pub clause: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
    pub format: ExplainFormat,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run records written with --json.
    #[arg(required = true, value_name = "RUN.json")]
    pub records: Vec<PathBuf>,
    /// Join the records of the shards of one run into one report.
    #[arg(long, conflicts_with = "compare")]
    pub merge: bool,
    /// What changed between two runs (BEFORE.json AFTER.json): new failures, fixed clauses,
    /// verdicts that moved, clauses added or removed. Exit status 1 when something got worse.
    #[arg(long)]
    pub compare: bool,
    /// Count SHOULD failures as failures when computing the verdict and exit status.
    #[arg(long)]
    pub strict: bool,
    /// Apply a list of known failures to the record (replacing the one the run applied).
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_KNOWN_FAILURES")]
    pub known_failures: Option<PathBuf>,
    /// Write a list of known failures from the record: every failing clause, with the first
    /// line of its reason.
    #[arg(long, value_name = "FILE", conflicts_with = "compare")]
    pub write_known_failures: Option<PathBuf>,
    #[command(flatten)]
    pub reports: ReportFiles,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub command: FleetCommand,
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Read the run records of the job's newest allocation on every node through the Nomad
    /// HTTP API and merge them into one report: a table node x plugin x verdict, problems
    /// first, and a section per node. Exit status: 0 every plugin on every node conformant;
    /// 1 something failed or a node has no record; 2 usage; 3 Nomad unreachable or answered
    /// an error.
    Collect(Box<CollectArgs>),
    /// On a node of the conform-fleet job: find the node's allocation of a CSI node plugin
    /// through the CSI plugin API, and run `nomad-conform csi --plugin-type node` against the
    /// socket Nomad's client gives it (<state-dir>/csi/plugins/<alloc ID>/csi.sock). Exit 3
    /// when the plugin has no healthy allocation on the node.
    CsiNode(Box<CsiNodeArgs>),
}

#[derive(Debug, Args)]
pub struct CsiNodeArgs {
    /// The CSI plugin's ID (its job's csi_plugin { id }).
    #[arg(long, value_name = "ID")]
    pub plugin_id: String,
    /// This node's ID (${node.unique.id} in the job).
    #[arg(long, value_name = "NODE_ID")]
    pub node_id: String,
    /// The client's state_dir (<data_dir>/client unless client { state_dir } is set).
    #[arg(long, value_name = "DIR", default_value = "/opt/nomad/data/client")]
    pub state_dir: PathBuf,
    /// Where the CSI run writes its record (given to nomad-conform csi --json).
    #[arg(long, value_name = "FILE")]
    pub json: PathBuf,
    /// How long to wait for Nomad's answer.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub timeout: String,
    /// The Nomad API (in the job: the Task API socket and the workload identity's token).
    #[command(flatten)]
    pub api: NomadApiArgs,
    /// More flags for nomad-conform csi (after --), e.g. -- --volume vol-1.
    #[arg(last = true, value_name = "CSI-FLAGS")]
    pub csi_args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CollectArgs {
    /// The job that ran nomad-conform on every node (deploy/nomad/conform-fleet.nomad.hcl).
    #[arg(long, value_name = "JOB", default_value = "conform-fleet")]
    pub job: String,
    /// The Nomad API (default http://127.0.0.1:4646, or NOMAD_ADDR), the job's namespace
    /// (default "default"), and an ACL token with read-job and read-fs on it (read-plugin
    /// too with --csi-plugin).
    #[command(flatten)]
    pub api: NomadApiArgs,
    /// The CSI plugin the job tested as a node plugin (its csi_plugin_id variable): a node
    /// whose plugin has no healthy allocation is shown as such (needs read-plugin).
    #[arg(long, value_name = "ID", env = "NOMAD_CONFORM_CSI_PLUGIN")]
    pub csi_plugin: Option<String>,
    /// The directory of each allocation that holds the records, as the fs API names it
    /// (the jobspec writes them to ${NOMAD_ALLOC_DIR}/conform).
    #[arg(long, value_name = "PATH", default_value = "alloc/conform")]
    pub records_dir: String,
    /// How long to wait for each answer from Nomad.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub timeout: String,
    #[command(flatten)]
    pub reports: ReportFiles,
}

/// How to reach the Nomad HTTP API, named like the nomad CLI's flags. Each setting falls back
/// to the nomad CLI's environment variable (NOMAD_TOKEN, NOMAD_CACERT, ...) after the flag,
/// its NOMAD_CONFORM_* variable and nomad-conform.toml (see `nomad_api::settings`).
#[derive(Clone, Debug, Default, Args)]
pub struct NomadApiArgs {
    /// The Nomad HTTP API: http://HOST:PORT, https://HOST:PORT or unix:///PATH.
    #[arg(long, value_name = "URL", env = "NOMAD_CONFORM_NOMAD_ADDR")]
    pub nomad_addr: Option<String>,
    /// The ACL token, sent as X-Nomad-Token (else NOMAD_TOKEN). Never written anywhere.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "NOMAD_CONFORM_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// The namespace (else NOMAD_NAMESPACE).
    #[arg(long, value_name = "NS", env = "NOMAD_CONFORM_NAMESPACE")]
    pub namespace: Option<String>,
    /// The region, sent as region= on every request (else NOMAD_REGION).
    #[arg(long, value_name = "REGION", env = "NOMAD_CONFORM_REGION")]
    pub region: Option<String>,
    /// https: a PEM file (or a directory) of the CA certificates to trust (else
    /// NOMAD_CACERT; default: the system's).
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// https: a directory of PEM CA certificates, used when --ca-cert is not given (else
    /// NOMAD_CAPATH).
    #[arg(long, value_name = "DIR", env = "NOMAD_CONFORM_CA_PATH")]
    pub ca_path: Option<PathBuf>,
    /// https: the client certificate for mutual TLS, PEM (else NOMAD_CLIENT_CERT).
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_CLIENT_CERT")]
    pub client_cert: Option<PathBuf>,
    /// https: the client certificate's private key, PEM (else NOMAD_CLIENT_KEY).
    #[arg(long, value_name = "FILE", env = "NOMAD_CONFORM_CLIENT_KEY")]
    pub client_key: Option<PathBuf>,
    /// https: the name the server's certificate must have, and the SNI sent (else
    /// NOMAD_TLS_SERVER_NAME; default: the address's host), e.g. server.global.nomad.
    #[arg(long, value_name = "NAME", env = "NOMAD_CONFORM_TLS_SERVER_NAME")]
    pub tls_server_name: Option<String>,
    /// https: do not verify the server's certificate (else NOMAD_SKIP_VERIFY); the report
    /// says so.
    #[arg(long, env = "NOMAD_CONFORM_TLS_SKIP_VERIFY")]
    pub tls_skip_verify: bool,
}

/// A count that must be at least 1 (`--jobs 0` would run nothing; a negative number is not a
/// count): the message is about the number, not about an unknown flag.
fn at_least_one<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + From<u8>,
{
    match text.trim().parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err(format!("{text:?} is not a whole number of at least 1")),
    }
}

/// A seed: a whole number from 0 to 2^64 - 1.
fn seed(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .map_err(|_| format!("{text:?} is not a whole number from 0 to {}", u64::MAX))
}
