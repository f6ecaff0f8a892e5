//! GPU capacity: Capacity Block purchases (plan shows the price, approval is separate,
//! the price guard, never twice — not after a lost state file, not after kill -9 —
//! retain on destroy, immutable once bought), On-Demand Capacity Reservations, and the
//! quota preflight. Read back from the emulator, which counts purchases.

use std::time::{Duration, Instant};

use crate::harness::{Env, block_on};

/// RFC 3339, `days` from now.
fn in_days(days: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days);
    t.round(jiff::Unit::Second).unwrap().to_string()
}

fn block_stack(name: &str, count: u32, max_usd: u32) -> String {
    format!(
        r#"[stack]
name   = "{name}"
region = "us-west-2"

[capacity_block.train]
instance_type     = "p5.48xlarge"
instance_count    = {count}
duration_hours    = 24
start_after       = "{}"
start_before      = "{}"
availability_zone = "us-west-2b"
max_upfront_usd   = {max_usd}

[output]
block = "${{capacity_block.train.id}}"
ends  = "${{capacity_block.train.end_date}}"
"#,
        in_days(1),
        in_days(6)
    )
}

type Tags = Vec<(String, String)>;

/// The emulator's reservations, as (id, state, tags).
fn reservations(env: &Env) -> Vec<(String, String, Tags)> {
    let ec2 = env.emu.ec2();
    block_on(async move {
        let out = ec2.describe_capacity_reservations().send().await.unwrap();
        out.capacity_reservations()
            .iter()
            .map(|r| {
                (
                    r.capacity_reservation_id().unwrap().to_string(),
                    r.state().unwrap().as_str().to_string(),
                    r.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string())).collect(),
                )
            })
            .collect()
    })
}

#[test]
fn a_capacity_block_is_priced_approved_bought_once_and_retained() {
    let env = Env::new();
    env.write("b.toml", &block_stack("cb", 1, 40000));

    // The plan shows the purchase: offering, zone, dates, price, non-refundable.
    let plan = env.ok(&["plan", "b.toml"]);
    assert!(plan.stdout.contains("+ capacity_block.train               purchase (non-refundable)"), "{plan:?}");
    assert!(plan.stdout.contains("$ 1× p5.48xlarge in us-west-2b"), "{plan:?}");
    assert!(plan.stdout.contains("USD up front (max 40000), offering cb-"), "{plan:?}");
    assert!(plan.stdout.contains("Purchases: 1 Capacity Block, $"), "{plan:?}");
    let json = env.ok(&["plan", "b.toml", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let price = j["changes"][0]["purchase"]["upfront_usd"].as_f64().unwrap();
    assert!(price > 0.0 && j["purchases_usd"].as_f64() == Some(price), "{j}");

    // The price guard refuses at plan time.
    env.write("cheap.toml", &block_stack("cb", 1, 10));
    let guard = env.run(&["plan", "cheap.toml"]);
    assert_eq!(guard.code, 1, "{guard:?}");
    assert!(guard.stderr.contains("up front, more than max_upfront_usd = 10"), "{guard:?}");
    assert!(guard.stderr.contains("cheap.toml:"), "names the file: {guard:?}");

    // --auto-approve alone does not buy, and says why.
    let refused = env.run(&["apply", "b.toml", "--auto-approve"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("--auto-approve alone does not buy"), "{refused:?}");
    assert!(refused.stderr.contains("--approve-purchases"), "{refused:?}");
    assert_eq!(env.emu.purchases(), 0);

    let bought = env.ok(&["apply", "b.toml", "--auto-approve", "--approve-purchases"]);
    assert!(bought.stderr.contains("capacity_block.train: bought cr-"), "{bought:?}");
    assert_eq!(env.emu.purchases(), 1);
    let st = env.state("cb");
    let id = st["resources"]["capacity_block.train"]["id"].as_str().unwrap().to_string();
    let out = &st["resources"]["capacity_block.train"]["outputs"];
    assert_eq!(out["availability_zone"], "us-west-2b");
    assert!((out["upfront_usd"].as_f64().unwrap() - price).abs() < 0.01, "{out}");
    assert!(out["end_date"].as_str().unwrap().ends_with("T11:30:00Z"), "blocks end at 11:30 UTC: {out}");
    let tags = &reservations(&env).into_iter().find(|r| r.0 == id).unwrap().2;
    assert!(tags.contains(&("gpustack:address".into(), "capacity_block.train".into())), "{tags:?}");
    assert_eq!(env.run(&["plan", "b.toml", "--detailed-exitcode"]).code, 0, "in sync after the purchase");

    // The state file is lost: the block is found by its tags and adopted, not bought again.
    std::fs::remove_file(env.path("state/cb.json")).unwrap();
    let plan = env.ok(&["plan", "b.toml"]);
    assert!(plan.stdout.contains("= capacity_block.train"), "{plan:?}");
    assert!(!plan.stdout.contains("Purchases:"), "{plan:?}");
    env.ok(&["apply", "b.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.emu.purchases(), 1, "never twice");
    assert_eq!(env.state("cb")["resources"]["capacity_block.train"]["id"], id.as_str());

    // A bought block cannot change.
    env.write("b.toml", &block_stack("cb", 2, 40000));
    let change = env.run(&["plan", "b.toml"]);
    assert_eq!(change.code, 1, "{change:?}");
    assert!(
        change.stderr.contains(&format!("`capacity_block.train` ({id}) was bought and cannot change: instance_count")),
        "{change:?}"
    );
    assert!(change.stderr.contains("cannot be modified or cancelled"), "{change:?}");
    env.write("b.toml", &block_stack("cb", 1, 40000));

    // Destroy retains it: shown with its end date, dropped from state, still active in EC2.
    let plan = env.ok(&["plan", "b.toml", "--destroy"]);
    assert!(plan.stdout.contains(&format!("retain {id} (cannot be cancelled: runs until ")), "{plan:?}");
    assert!(plan.stdout.contains("Retained: 1 Capacity Block cannot be cancelled; it stays"), "{plan:?}");
    env.ok(&["destroy", "b.toml", "--auto-approve"]);
    assert!(env.state("cb")["resources"].as_object().unwrap().is_empty());
    let (_, state, tags) = reservations(&env).into_iter().find(|r| r.0 == id).unwrap();
    assert!(state == "scheduled" || state == "active", "not cancelled: {state}");
    assert!(tags.contains(&("gpustack:retained-from".into(), "cb capacity_block.train".into())), "{tags:?}");
    assert!(!tags.iter().any(|(k, _)| k == "gpustack:stack"), "{tags:?}");

    // Declaring it again takes the retained block back instead of buying.
    let again = env.ok(&["plan", "b.toml"]);
    assert!(again.stdout.contains("taking back"), "{again:?}");
    env.ok(&["apply", "b.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.emu.purchases(), 1);

    // Removed from the stack: retained again, and later plans do not list it.
    env.write("b.toml", "[stack]\nname = \"cb\"\nregion = \"us-west-2\"\n");
    let gone = env.ok(&["apply", "b.toml", "--auto-approve"]);
    assert!(gone.stdout.contains("retain"), "{gone:?}");
    assert_eq!(env.run(&["plan", "b.toml", "--detailed-exitcode"]).code, 0, "a retained block is no stray");
    assert_eq!(env.emu.purchases(), 1);
}

#[test]
fn an_offering_that_got_dearer_stops_the_apply_without_buying() {
    let env = Env::new();
    env.write("b.toml", &block_stack("dear", 1, 40000));

    // A saved plan no longer matches once the price moved.
    env.ok(&["plan", "b.toml", "--out", "p.json"]);
    env.emu.control("POST", "/_gpustack/capacity/offerings?price_multiplier=1.5");
    let stale = env.run(&["apply", "p.json", "--approve-purchases"]);
    assert_eq!(stale.code, 1, "{stale:?}");
    assert!(stale.stderr.contains("no longer matches"), "{stale:?}");
    assert_eq!(env.emu.purchases(), 0);
    env.emu.control("POST", "/_gpustack/capacity/offerings?reset=1");

    // The price moves between the approved plan and the purchase: the re-check refuses.
    env.emu.set_latency(300);
    let child = env
        .command(&["apply", "b.toml", "--auto-approve", "--approve-purchases"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pending = std::fs::read_to_string(env.path("state/dear.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|s| s["pending"].as_array().is_some_and(|p| !p.is_empty()));
        if pending {
            break;
        }
        assert!(Instant::now() < deadline, "the purchase never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    env.emu.control("POST", "/_gpustack/capacity/offerings?price_multiplier=2");
    let out = child.wait_with_output().unwrap();
    env.emu.set_latency(0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("not the $") && stdout.contains("nothing was bought"), "{stdout}");
    assert_eq!(env.emu.purchases(), 0);
}

#[test]
fn kill_9_right_after_the_purchase_call_never_buys_twice() {
    let env = Env::new();
    env.write("b.toml", &block_stack("k9", 1, 40000));
    // Answers come 400 ms after the emulator acted: the kill lands between the purchase and
    // gpustack recording it.
    env.emu.set_latency(0);
    env.emu.control("POST", "/_gpustack/latency?ms=400&after=1");
    let mut child = env
        .command(&["apply", "b.toml", "--auto-approve", "--approve-purchases"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.emu.purchases() == 0 {
        assert!(child.try_wait().unwrap().is_none(), "the apply ended before buying");
        assert!(Instant::now() < deadline, "no purchase happened");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    env.emu.control("POST", "/_gpustack/latency?ms=0&after=1");
    let st = env.state("k9");
    assert!(st["resources"].get("capacity_block.train").is_none(), "killed before recording: {st}");
    assert_eq!(st["pending"].as_array().map(Vec::len), Some(1), "the purchase is journaled: {st}");

    let again = env.ok(&["apply", "b.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.emu.purchases(), 1, "never twice: {again:?}");
    let st = env.state("k9");
    assert!(st["resources"]["capacity_block.train"]["id"].as_str().unwrap().starts_with("cr-"));
    assert!(st.get("pending").is_none(), "{st}");
    assert_eq!(env.run(&["plan", "b.toml", "--detailed-exitcode"]).code, 0);
}

const ODCR: &str = r#"[stack]
name   = "odcr"
region = "us-west-2"

[capacity_reservation.steady]
instance_type     = "g6.12xlarge"
availability_zone = "us-west-2a"
instance_count    = COUNT
"#;

#[test]
fn an_odcr_is_created_once_updated_in_place_and_cancelled_on_destroy() {
    let env = Env::new();
    env.write("r.toml", &ODCR.replace("COUNT", "2"));
    env.ok(&["apply", "r.toml", "--auto-approve"]);
    let id = env.state("odcr")["resources"]["capacity_reservation.steady"]["id"].as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    let read = move |id: String| {
        let ec2 = ec2.clone();
        block_on(async move {
            let r = ec2.describe_capacity_reservations().capacity_reservation_ids(id).send().await.unwrap();
            let r = &r.capacity_reservations()[0];
            (
                r.total_instance_count().unwrap(),
                r.instance_match_criteria().unwrap().as_str().to_string(),
                r.state().unwrap().as_str().to_string(),
            )
        })
    };
    assert_eq!(read(id.clone()), (2, "targeted".into(), "active".into()));

    // Lost state: adopted by its tags, not reserved twice.
    std::fs::remove_file(env.path("state/odcr.json")).unwrap();
    env.ok(&["apply", "r.toml", "--auto-approve"]);
    assert_eq!(reservations(&env).iter().filter(|r| r.1 == "active").count(), 1);

    env.write("r.toml", &ODCR.replace("COUNT", "3"));
    let plan = env.ok(&["plan", "r.toml"]);
    assert!(
        plan.stdout.contains("~ capacity_reservation.steady") && plan.stdout.contains("instance_count: 2 → 3"),
        "{plan:?}"
    );
    env.ok(&["apply", "r.toml", "--auto-approve"]);
    assert_eq!(read(id.clone()).0, 3);
    assert_eq!(env.state("odcr")["resources"]["capacity_reservation.steady"]["id"], id.as_str(), "in place");

    env.ok(&["destroy", "r.toml", "--auto-approve"]);
    assert_eq!(read(id).2, "cancelled");
}

/// A node group of two p5.48xlarge (384 vCPUs) on demand.
const P5_POOL: &str = r#"[stack]
name   = "quota"
region = "us-west-2"

[eks_cluster.main]
version             = "1.33"
role                = "arn:aws:iam::123456789012:role/cluster"
subnets             = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
public_access_cidrs = ["203.0.113.0/24"]

[launch_template.p5]
instance_type = "p5.48xlarge"

[node_group.train]
cluster         = "${eks_cluster.main.name}"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["subnet-0123456789abcdef0"]
launch_template = "${launch_template.p5.id}"
scaling         = { min = 0, desired = 2, max = 2 }
"#;

#[test]
fn a_short_quota_stops_the_plan_naming_the_code_the_need_and_the_limit() {
    let env = Env::new();
    env.write("q.toml", P5_POOL);
    env.ok(&["plan", "q.toml"]);

    env.emu.control("POST", "/_gpustack/quotas?code=L-417A185B&value=96");
    let short = env.run(&["plan", "q.toml"]);
    assert_eq!(short.code, 1, "{short:?}");
    assert!(
        short.stderr.contains("this stack needs 384 vCPUs of quota L-417A185B (Running On-Demand P instances), but the account's limit in us-west-2 is 96"),
        "{short:?}"
    );
    assert!(short.stderr.contains("node_group.train: 2 × 192 vCPUs (p5.48xlarge)"), "{short:?}");
    assert!(short.stderr.contains("request-service-quota-increase"), "{short:?}");
    let apply = env.run(&["apply", "q.toml", "--auto-approve"]);
    assert_eq!(apply.code, 1, "apply checks again: {apply:?}");
    assert!(
        env.emu.requests().iter().all(|(_, a)| !a.starts_with("Create") && !a.starts_with("POST")),
        "nothing created"
    );

    // Denied API: an error that says how to skip; --skip-quota-check skips.
    env.emu.control("POST", "/_gpustack/quotas?code=L-417A185B&value=1536&deny=1");
    let denied = env.run(&["plan", "q.toml"]);
    assert_eq!(denied.code, 1, "{denied:?}");
    assert!(denied.stderr.contains("--skip-quota-check"), "{denied:?}");
    env.ok(&["plan", "q.toml", "--skip-quota-check"]);
}

#[test]
fn capacity_settings_are_checked_offline() {
    let env = Env::new();
    let cases: &[(&str, &str, &str)] = &[
        ("instance_count    = 1", "instance_count    = 65", "`instance_count` = 65 is not offered for Capacity Blocks"),
        ("duration_hours    = 24", "duration_hours    = 25", "`duration_hours` = 25 is not a Capacity Block length"),
        ("duration_hours    = 24", "duration_hours    = 400", "`duration_hours` = 400 is not a Capacity Block length"),
    ];
    for (i, (from, to, msg)) in cases.iter().enumerate() {
        let f = format!("c{i}.toml");
        env.write(&f, &block_stack("off", 1, 40000).replace(from, to));
        let r = env.run(&["validate", &f]);
        assert_eq!(r.code, 1, "{r:?}");
        assert!(r.stderr.contains(msg), "{msg}: {r:?}");
    }
    let far = block_stack("off", 1, 40000).replace(&in_days(1), &in_days(70)).replace(&in_days(6), &in_days(75));
    env.write("far.toml", &far);
    let r = env.run(&["validate", "far.toml"]);
    assert!(r.stderr.contains("more than 8 weeks ahead"), "{r:?}");

    // A CAPACITY_BLOCK node group must fit its block.
    let stack = format!(
        "{}\n[launch_template.p5]\ninstance_type = \"p5.48xlarge\"\ncapacity_reservation = \"${{capacity_block.train.id}}\"\nmarket = \"capacity-block\"\n\n[eks_cluster.main]\nversion = \"1.33\"\nrole = \"arn:aws:iam::1:role/c\"\nsubnets = [\"subnet-1\", \"subnet-2\"]\npublic_access_cidrs = [\"203.0.113.0/24\"]\n\n[node_group.train]\ncluster = \"${{eks_cluster.main.name}}\"\nnode_role = \"arn:aws:iam::1:role/n\"\nsubnets = [\"subnet-1\"]\nlaunch_template = \"${{launch_template.p5.id}}\"\ncapacity_type = \"CAPACITY_BLOCK\"\nscaling = {{ min = 0, max = 4 }}\n",
        block_stack("off", 2, 40000).split("[output]").next().unwrap()
    );
    env.write("fit.toml", &stack);
    let r = env.run(&["validate", "fit.toml"]);
    assert!(
        r.stderr.contains("`node_group.train` may scale to 4 nodes, but `capacity_block.train` holds 2 instances"),
        "{r:?}"
    );
}

mod find;
