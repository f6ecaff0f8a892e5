//! Test harness: an emulator per test on a free loopback port, a temp working
//! directory per test, and the gpustack binary run in it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

pub const REGION: &str = "us-west-2";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Creates the emulator's virtualenv once per test process (idempotent, locked, fast when done).
fn setup_emulator() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let st = Command::new("bash")
            .arg(repo().join("tests/emulator/setup.sh"))
            .status()
            .expect("run tests/emulator/setup.sh");
        assert!(st.success(), "tests/emulator/setup.sh failed");
    });
}

pub struct Emulator {
    child: Child,
    pub url: String,
}

impl Emulator {
    pub fn start() -> Emulator {
        setup_emulator();
        let python = repo().join("tests/emulator/.venv/bin/python");
        let mut child = Command::new(python)
            .arg(repo().join("tests/emulator/server.py"))
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the emulator");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read READY");
        let port = line
            .trim()
            .strip_prefix("GPUSTACK_EMULATOR_READY port=")
            .unwrap_or_else(|| panic!("emulator said {line:?}"));
        Emulator { child, url: format!("http://127.0.0.1:{port}") }
    }

    fn http(&self, method: &str, path: &str) -> String {
        let addr = self.url.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).expect("connect to emulator");
        write!(s, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n").unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        resp.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()
    }

    /// A control endpoint of the emulator (`/_gpustack/...`), as JSON.
    pub fn control(&self, method: &str, path: &str) -> serde_json::Value {
        let body = self.http(method, path);
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {body}"))
    }

    /// How many Capacity Blocks have been bought.
    pub fn purchases(&self) -> u64 {
        self.control("GET", "/_gpustack/capacity/purchases")["count"].as_u64().unwrap()
    }

    /// Every AWS request so far as (service, action).
    pub fn requests(&self) -> Vec<(String, String)> {
        let v: serde_json::Value = serde_json::from_str(&self.http("GET", "/_gpustack/requests")).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| (r["service"].as_str().unwrap_or("").to_string(), r["action"].as_str().unwrap_or("").to_string()))
            .collect()
    }

    pub fn reset_requests(&self) {
        self.http("POST", "/_gpustack/requests/reset");
    }

    /// Every later AWS request waits `ms` before it is answered.
    pub fn set_latency(&self, ms: u64) {
        self.http("POST", &format!("/_gpustack/latency?ms={ms}"));
    }

    /// Every `every`th later AWS request fails with `kind` ("throttle" or "5xx"); 0 turns it off.
    /// Returns how many faults the emulator has injected so far.
    pub fn set_faults(&self, every: u64, kind: &str) -> u64 {
        let v: serde_json::Value =
            serde_json::from_str(&self.http("POST", &format!("/_gpustack/faults?every={every}&kind={kind}"))).unwrap();
        v["injected_so_far"].as_u64().unwrap()
    }

    fn sdk_config(&self) -> aws_sdk_ec2::config::Builder {
        aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_ec2::config::Credentials::new("test", "test", None, None, "test"))
    }

    pub fn ec2(&self) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::from_conf(self.sdk_config().build())
    }

    pub fn iam(&self) -> aws_sdk_iam::Client {
        let conf = aws_sdk_iam::Config::builder()
            .behavior_version(aws_sdk_iam::config::BehaviorVersion::latest())
            .region(aws_sdk_iam::config::Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_iam::config::Credentials::new("test", "test", None, None, "test"))
            .build();
        aws_sdk_iam::Client::from_conf(conf)
    }
}

impl Emulator {
    pub fn eks(&self) -> aws_sdk_eks::Client {
        let conf = aws_sdk_eks::Config::builder()
            .behavior_version(aws_sdk_eks::config::BehaviorVersion::latest())
            .region(aws_sdk_eks::config::Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_eks::config::Credentials::new("test", "test", None, None, "test"))
            .build();
        aws_sdk_eks::Client::from_conf(conf)
    }
}

impl Emulator {
    pub fn ssm(&self) -> aws_sdk_ssm::Client {
        let conf = aws_sdk_ssm::Config::builder()
            .behavior_version(aws_sdk_ssm::config::BehaviorVersion::latest())
            .region(aws_sdk_ssm::config::Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_ssm::config::Credentials::new("test", "test", None, None, "test"))
            .build();
        aws_sdk_ssm::Client::from_conf(conf)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// A temp working directory with an emulator, where gpustack runs.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub emu: Emulator,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}\n--- stdout\n{}\n--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_gpustack")
}

impl Env {
    pub fn new() -> Env {
        Env { dir: tempfile::tempdir().unwrap(), emu: Emulator::start() }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(self.dir.path())
            .env("AWS_ENDPOINT_URL", &self.emu.url)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("AWS_PROFILE")
            .env("NO_COLOR", "1")
            // The emulator answers in-flight calls within milliseconds of a kill.
            .env("GPUSTACK_SETTLE_SECONDS", "1")
            .env("GPUSTACK_POLL_MAX_SECONDS", "0.2")
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let out: Output = self.command(args).output().expect("run gpustack");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs and asserts the exit code.
    pub fn ok(&self, args: &[&str]) -> Run {
        let r = self.run(args);
        assert_eq!(r.code, 0, "gpustack {args:?} failed:\n{r:?}");
        r
    }

    pub fn state(&self, stack: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.path(&format!("state/{stack}.json"))).expect("state file");
        serde_json::from_str(&text).unwrap()
    }

    /// Ids of every EC2 object and IAM role tagged for (or pathed under) `stack`, by type.
    pub fn tagged(&self, stack: &str) -> Tagged {
        let ec2 = self.emu.ec2();
        let iam = self.emu.iam();
        let stack = stack.to_string();
        block_on(async move {
            let f = || aws_sdk_ec2::types::Filter::builder().name("tag:gpustack:stack").values(stack.clone()).build();
            let vpcs = ec2.describe_vpcs().filters(f()).send().await.unwrap();
            let subnets = ec2.describe_subnets().filters(f()).send().await.unwrap();
            let sgs = ec2.describe_security_groups().filters(f()).send().await.unwrap();
            let igws = ec2.describe_internet_gateways().filters(f()).send().await.unwrap();
            let rts = ec2.describe_route_tables().filters(f()).send().await.unwrap();
            let pgs = ec2.describe_placement_groups().filters(f()).send().await.unwrap();
            let roles = iam.list_roles().path_prefix(format!("/gpustack/{stack}/")).send().await.unwrap();
            let profiles =
                iam.list_instance_profiles().path_prefix(format!("/gpustack/{stack}/")).send().await.unwrap();
            Tagged {
                vpcs: vpcs.vpcs().iter().filter_map(|v| v.vpc_id().map(String::from)).collect(),
                subnets: subnets.subnets().iter().filter_map(|v| v.subnet_id().map(String::from)).collect(),
                security_groups: sgs.security_groups().iter().filter_map(|v| v.group_id().map(String::from)).collect(),
                gateways: igws
                    .internet_gateways()
                    .iter()
                    .filter_map(|v| v.internet_gateway_id().map(String::from))
                    .collect(),
                route_tables: rts.route_tables().iter().filter_map(|v| v.route_table_id().map(String::from)).collect(),
                placement_groups: pgs
                    .placement_groups()
                    .iter()
                    .filter_map(|v| v.group_name().map(String::from))
                    .collect(),
                roles: roles.roles().iter().map(|r| r.role_name().to_string()).collect(),
                // moto ignores PathPrefix for ListInstanceProfiles: filter here.
                instance_profiles: profiles
                    .instance_profiles()
                    .iter()
                    .filter(|p| p.path() == format!("/gpustack/{stack}/"))
                    .map(|p| p.instance_profile_name().to_string())
                    .collect(),
            }
        })
    }
}

#[derive(Debug, Default, PartialEq)]
pub struct Tagged {
    pub vpcs: Vec<String>,
    pub subnets: Vec<String>,
    pub security_groups: Vec<String>,
    pub gateways: Vec<String>,
    pub route_tables: Vec<String>,
    pub placement_groups: Vec<String>,
    pub roles: Vec<String>,
    pub instance_profiles: Vec<String>,
}

impl Tagged {
    /// (vpcs, subnets, security groups, gateways, route tables, placement groups, roles, instance profiles)
    pub fn counts(&self) -> (usize, usize, usize, usize, usize, usize, usize, usize) {
        (
            self.vpcs.len(),
            self.subnets.len(),
            self.security_groups.len(),
            self.gateways.len(),
            self.route_tables.len(),
            self.placement_groups.len(),
            self.roles.len(),
            self.instance_profiles.len(),
        )
    }

    pub fn total(&self) -> usize {
        self.vpcs.len()
            + self.subnets.len()
            + self.security_groups.len()
            + self.gateways.len()
            + self.route_tables.len()
            + self.placement_groups.len()
            + self.roles.len()
            + self.instance_profiles.len()
    }
}

/// A network stack like stacks/quickstart.toml, named `name`; `extra` is appended.
pub fn network_stack(name: &str, extra: &str) -> String {
    format!(
        r#"[stack]
name   = "{name}"
region = "us-west-2"
tags   = {{ team = "ml" }}

[vpc.main]
cidr_block       = "10.42.0.0/16"
internet_gateway = true

[subnet.a]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.42.0.0/20"
availability_zone = "us-west-2a"
public            = true

[subnet.b]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.42.16.0/20"
availability_zone = "us-west-2b"

[security_group.efa]
vpc     = "${{vpc.main.id}}"
efa     = true
ingress = [{{ protocol = "tcp", from_port = 443, cidr = "10.42.0.0/16" }}]

[placement_group.train]
strategy = "cluster"

[iam_role.node]
service          = "ec2.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"]
instance_profile = true

[output]
vpc_id = "${{vpc.main.id}}"
role   = "${{iam_role.node.arn}}"
{extra}"#
    )
}

/// S3, for the remote-state tests: path-style, as gpustack uses it with an endpoint URL.
impl Emulator {
    pub fn s3(&self) -> aws_sdk_s3::Client {
        let conf = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new(REGION))
            .endpoint_url(&self.url)
            .force_path_style(true)
            .credentials_provider(aws_sdk_s3::config::Credentials::new("test", "test", None, None, "test"))
            .build();
        aws_sdk_s3::Client::from_conf(conf)
    }

    pub fn create_bucket(&self, bucket: &str) {
        let s3 = self.s3();
        let location = aws_sdk_s3::types::CreateBucketConfiguration::builder()
            .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::UsWest2)
            .build();
        block_on(s3.create_bucket().bucket(bucket).create_bucket_configuration(location).send()).unwrap();
    }

    /// An object's body and ETag, or `None` when it does not exist.
    pub fn s3_get(&self, bucket: &str, key: &str) -> Option<(Vec<u8>, String)> {
        let s3 = self.s3();
        block_on(async move {
            let out = s3.get_object().bucket(bucket).key(key).send().await.ok()?;
            let etag = out.e_tag().unwrap_or_default().to_string();
            Some((out.body.collect().await.ok()?.into_bytes().to_vec(), etag))
        })
    }

    pub fn s3_put(&self, bucket: &str, key: &str, body: &[u8]) {
        let s3 = self.s3();
        let body = aws_sdk_s3::primitives::ByteStream::from(body.to_vec());
        block_on(s3.put_object().bucket(bucket).key(key).body(body).send()).unwrap();
    }
}

/// SQS and EventBridge, for the Karpenter controller's interruption queue and rules.
impl Emulator {
    pub fn sqs(&self) -> aws_sdk_sqs::Client {
        let conf = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_sqs::config::Credentials::new("test", "test", None, None, "test"))
            .build();
        aws_sdk_sqs::Client::from_conf(conf)
    }

    pub fn events(&self) -> aws_sdk_eventbridge::Client {
        let conf = aws_sdk_eventbridge::Config::builder()
            .behavior_version(aws_sdk_eventbridge::config::BehaviorVersion::latest())
            .region(aws_sdk_eventbridge::config::Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_eventbridge::config::Credentials::new("test", "test", None, None, "test"))
            .build();
        aws_sdk_eventbridge::Client::from_conf(conf)
    }
}

impl Emulator {
    pub fn sagemaker(&self) -> aws_sdk_sagemaker::Client {
        let conf = aws_sdk_sagemaker::Config::builder()
            .behavior_version(aws_sdk_sagemaker::config::BehaviorVersion::latest())
            .region(aws_sdk_sagemaker::config::Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_sagemaker::config::Credentials::new("test", "test", None, None, "test"))
            .build();
        aws_sdk_sagemaker::Client::from_conf(conf)
    }

    /// How many training plans have been bought.
    pub fn training_plan_purchases(&self) -> u64 {
        self.control("GET", "/_gpustack/sagemaker/purchases")["count"].as_u64().unwrap()
    }
}
