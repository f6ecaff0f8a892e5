//! `gpustack capacity timeline` and `gpustack status` through the real binary against the
//! emulator: a stack with an idle On-Demand Capacity Reservation and a Capacity Block that
//! started yesterday and ends tomorrow (bought for the future, then moved in time with the
//! emulator's window control), "now" pinned with GPUSTACK_NOW.

use std::collections::BTreeSet;

use crate::harness::{Env, Run};

/// Today's date (UTC) at `hh:mm`, shifted by `days`, as RFC 3339.
fn day_at(days: i64, hh: i8, mm: i8) -> String {
    let today = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date();
    let d = today.checked_add(jiff::Span::new().days(days)).unwrap();
    d.at(hh, mm, 0, 0).to_zoned(jiff::tz::TimeZone::UTC).unwrap().timestamp().to_string()
}

fn in_days(days: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days);
    t.round(jiff::Unit::Second).unwrap().to_string()
}

fn stack() -> String {
    format!(
        r#"[stack]
name   = "tl"
region = "us-west-2"

# Reserved for the nightly jobs; nothing runs there now.
[capacity_reservation.spare]
instance_type     = "p5.48xlarge"
availability_zone = "us-west-2b"
instance_count    = 2

[launch_template.spare]
instance_type        = "p5.48xlarge"
capacity_reservation = "${{capacity_reservation.spare.id}}"

[capacity_block.train]
instance_type     = "p5.48xlarge"
instance_count    = 1
duration_hours    = 24
start_after       = "{}"
start_before      = "{}"
availability_zone = "us-west-2b"
max_upfront_usd   = 40000
"#,
        in_days(1),
        in_days(6)
    )
}

struct Setup {
    env: Env,
    odcr: String,
    block: String,
    fee: f64,
}

/// Applies the stack, then moves the block to yesterday 11:30 → tomorrow 11:30 (UTC) and the
/// ODCR's start to six days ago, so "now" (today 10:00) sees both active.
fn setup() -> Setup {
    let env = Env::new();
    env.write("tl.toml", &stack());
    env.ok(&["apply", "tl.toml", "--auto-approve", "--approve-purchases"]);
    let st = env.state("tl");
    let odcr = st["resources"]["capacity_reservation.spare"]["id"].as_str().unwrap().to_string();
    let block = st["resources"]["capacity_block.train"]["id"].as_str().unwrap().to_string();
    let fee = st["resources"]["capacity_block.train"]["outputs"]["upfront_usd"].as_f64().unwrap();
    let moved = env.emu.control(
        "POST",
        &format!("/_gpustack/capacity/window?id={block}&start={}&end={}", day_at(-1, 11, 30), day_at(1, 11, 30)),
    );
    assert_eq!(moved["state"], "active", "{moved}");
    env.emu.control("POST", &format!("/_gpustack/capacity/window?id={odcr}&start={}&end=none", day_at(-6, 8, 0)));
    // The block's one instance runs; the ODCR's two are idle.
    env.emu.control("POST", &format!("/_gpustack/capacity/used?id={block}&count=1"));
    Setup { env, odcr, block, fee }
}

fn run_at(env: &Env, args: &[&str]) -> Run {
    let out = env.command(args).env("GPUSTACK_NOW", day_at(0, 10, 0)).output().expect("run gpustack");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The output with what changes from run to run (dates, ids, the block's fee) named instead.
fn redact(s: &Setup, text: &str) -> String {
    let mut t = text.replace(&s.odcr, "cr-ODCR").replace(&s.block, "cr-BLOCK");
    t = t.replace(&format!("${:.2}", s.fee), "$FEE").replace(&format!("${:.2}", s.fee / 48.0), "$FEE/48");
    for k in (-12..=12).rev() {
        let day = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date();
        let d = day.checked_add(jiff::Span::new().days(k)).unwrap();
        t = t.replace(&d.strftime("%b %d").to_string(), &format!("D{k:+03}  "));
    }
    t
}

#[test]
fn timeline_shows_an_idle_odcr_and_a_block_ending_tomorrow() {
    let s = setup();
    let env = &s.env;
    let run = run_at(env, &["capacity", "timeline", "tl.toml", "--svg", "tl.svg"]);
    assert_eq!(run.code, 0, "{run:?}");
    let text = &run.stdout;
    assert!(text.contains("capacity_block.train") && text.contains("⚠ ends within a week"), "{run:?}");
    assert!(text.contains("1d 01h left"), "ends tomorrow 11:30, now 10:00: {run:?}");
    assert!(text.contains("on it: launch_template.spare"), "{run:?}");
    // Priced independently: the emulator's price data (the price list it serves) × 2 idle.
    let od = emulator_on_demand("us-west-2", "p5.48xlarge");
    assert!(text.contains(&format!("░ idle now: 2 × ${od:.2} = ${:.2}/h", 2.0 * od)), "{run:?}");
    assert!(!text.contains('\x1b'), "NO_COLOR: no colour");
    insta::assert_snapshot!("timeline_terminal", redact(&s, text));

    // The picture: valid, the size it says, both lanes drawn, the ODCR's hatched orange.
    let svg = std::fs::read_to_string(env.path("tl.svg")).unwrap();
    assert!(svg.contains("capacity_block.train ⚠") && svg.contains("class=\"idle\""), "{svg}");
    insta::assert_snapshot!("timeline_svg", redact(&s, &svg));
    let pix = render(&svg);
    assert_eq!((pix.width(), pix.height()), (1200, 90 + 78 * 2 + 70));
    let px = |x: u32, y: u32| {
        let p = pix.pixel(x, y).unwrap();
        (p.red(), p.green(), p.blue())
    };
    // Lanes are 78 px from y = 90; bars 10..36 px into a lane. Right of "now" (x > 700 here):
    // the ODCR (first lane, no end date) is hatched orange, the block (second) solid blue.
    let orange = (700..760).any(|x| {
        let (r, g, b) = px(x, 90 + 30);
        r > 200 && (100..170).contains(&g) && b < 80
    });
    assert!(orange, "the idle ODCR is hatched orange");
    let blue = (700..1100).filter(|x| {
        let (r, _, b) = px(*x, 168 + 20);
        b > 150 && r < 100
    });
    assert!(blue.count() > 3, "the used block is blue");

    // --json for pipelines.
    let json = run_at(env, &["capacity", "timeline", "tl.toml", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let by = |a: &str| j["reservations"].as_array().unwrap().iter().find(|r| r["address"] == a).unwrap().clone();
    assert_eq!(by("capacity_reservation.spare")["idle"], 2);
    assert_eq!(by("capacity_block.train")["ends_within_week"], true);
    assert_eq!(by("capacity_block.train")["idle"], 0);
    let rate = by("capacity_block.train")["rate"]["usd_per_instance_hour"].as_f64().unwrap();
    assert!((rate - s.fee / 48.0).abs() < 1e-6, "up front / hours / instances: {rate} vs {}", s.fee / 48.0);
    assert_eq!(j["idle_instances"], 2);
    let idle_usd = by("capacity_reservation.spare")["idle_usd_per_hour"].as_f64().unwrap();
    assert!((idle_usd - 2.0 * od).abs() < 0.005, "{idle_usd} vs 2 × {od}");
    assert!((j["idle_usd_per_hour"].as_f64().unwrap() - 2.0 * od).abs() < 0.005, "{j}");
    let basis = by("capacity_reservation.spare")["rate"]["basis"].as_str().unwrap().to_string();
    assert!(basis.contains("AWS Price List"), "the live price list, not the snapshot: {basis}");
}

/// The On-Demand hourly price the emulator's price list holds (tests/emulator/data/prices.json).
fn emulator_on_demand(region: &str, instance_type: &str) -> f64 {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/emulator/data/prices.json");
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    data["on_demand"][region][instance_type]["usd"].as_str().unwrap().parse().unwrap()
}

#[test]
fn status_exits_3_while_reserved_capacity_is_idle_and_0_when_used() {
    let s = setup();
    let env = &s.env;
    env.emu.reset_requests();
    let idle = run_at(env, &["status", "tl.toml"]);
    assert_eq!(idle.code, 3, "{idle:?}");
    assert!(idle.stdout.contains("capacity_reservation.spare"), "{idle:?}");
    assert!(idle.stdout.contains("0/2"), "{idle:?}");
    assert!(idle.stdout.contains("1d 01h (ends"), "time left on the block: {idle:?}");
    let od = emulator_on_demand("us-west-2", "p5.48xlarge");
    assert!(
        idle.stdout.contains(&format!("Idle reserved capacity: 2 instances ≈ ${:.2}/h (exit 3)", 2.0 * od)),
        "{idle:?}"
    );
    let json = run_at(env, &["status", "tl.toml", "--json"]);
    assert_eq!(json.code, 3);
    let j: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!((j["idle_instances"].as_i64(), j["exit_code"].as_i64()), (Some(2), Some(3)), "{j}");
    // A pinned "now" is said (review timeline minor 6).
    assert_eq!(j["now_pinned"], true, "{j}");
    assert!(idle.stderr.contains("note: now pinned by GPUSTACK_NOW="), "{idle:?}");

    // Every call status makes (timeline's are a subset) is in `gpustack policy --for capacity`.
    let called: BTreeSet<String> =
        env.emu.requests().into_iter().map(|(svc, action)| format!("{svc}:{action}")).collect();
    let policy: serde_json::Value = serde_json::from_str(&env.ok(&["policy", "--for", "capacity"]).stdout).unwrap();
    let allowed: BTreeSet<String> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect();
    assert!(
        called.contains("ec2:DescribeCapacityReservations") && called.contains("pricing:GetProducts"),
        "{called:?}"
    );
    assert!(
        called.is_subset(&allowed),
        "called but not allowed: {:?}",
        called.difference(&allowed).collect::<Vec<_>>()
    );

    env.emu.control("POST", &format!("/_gpustack/capacity/used?id={}&count=2", s.odcr));
    let used = run_at(env, &["status", "tl.toml"]);
    assert_eq!(used.code, 0, "{used:?}");
    assert!(used.stdout.contains("Idle reserved capacity: none"), "{used:?}");

    // No state: an error (1) that says what to do.
    env.write("other.toml", "[stack]\nname = \"other\"\nregion = \"us-west-2\"\n");
    let none = run_at(env, &["status", "other.toml"]);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains("run `gpustack apply` first"), "{none:?}");
}

/// Review timeline M4: the node-group half of `status` against the emulator. The shipped
/// self-managed example (an Auto Scaling group whose instances moto runs InService/Healthy)
/// plus a managed node group: the self-managed row reads its ASG, the managed one
/// DescribeNodegroup; every call is in `policy --for capacity`.
#[test]
fn status_reads_managed_and_self_managed_node_groups() {
    let env = Env::new();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/self-managed.toml");
    let mut text = std::fs::read_to_string(path).unwrap();
    let at = text.find("[output]").unwrap();
    text.insert_str(
        at,
        r#"# Its own role: EKS enters a managed group's role itself (the self-managed one's entry
# would collide).
[iam_role.mng]
service          = "ec2.amazonaws.com"
managed_policies = [
  "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
  "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
  "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
]

[node_group.system]
cluster        = "${eks_cluster.main.name}"
node_role      = "${iam_role.mng.arn}"
subnets        = ["${subnet.a.id}", "${subnet.b.id}"]
instance_types = ["m6i.large"]
scaling        = { min = 1, desired = 2, max = 3 }

"#,
    );
    env.write("sm.toml", &text);
    env.ok(&["apply", "sm.toml", "--auto-approve"]);
    env.emu.reset_requests();
    let run = env.ok(&["status", "sm.toml", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(j["now_pinned"], false, "{j}");
    assert!(!run.stderr.contains("now pinned"), "{run:?}");
    let groups = j["node_groups"].as_array().unwrap_or_else(|| panic!("{j}"));
    let by = |a: &str| groups.iter().find(|g| g["address"] == a).unwrap_or_else(|| panic!("{a}: {j}")).clone();
    // The self-managed group: desired 1 from its ASG, its one instance InService and Healthy.
    let sm = by("self_managed_node_group.gpu");
    assert_eq!((sm["desired"].as_i64(), sm["ready"].as_i64()), (Some(1), Some(1)), "{sm}");
    // The managed group: desired from DescribeNodegroup's scalingConfig, ACTIVE, healthy.
    let mng = by("node_group.system");
    assert_eq!(mng["desired"].as_i64(), Some(2), "{mng}");
    assert_eq!(mng["status"], "ACTIVE", "{mng}");
    let text = env.ok(&["status", "sm.toml"]).stdout;
    assert!(text.contains("NODE GROUP") && text.contains("node_group.system"), "{text}");
    let called: BTreeSet<String> =
        env.emu.requests().into_iter().map(|(svc, action)| format!("{svc}:{action}")).collect();
    assert!(
        called.contains("eks:DescribeNodegroup") && called.contains("autoscaling:DescribeAutoScalingGroups"),
        "{called:?}"
    );
    let policy: serde_json::Value = serde_json::from_str(&env.ok(&["policy", "--for", "capacity"]).stdout).unwrap();
    let allowed: BTreeSet<String> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect();
    assert!(called.is_subset(&allowed), "not allowed: {:?}", called.difference(&allowed).collect::<Vec<_>>());
}

fn render(svg: &str) -> resvg::tiny_skia::Pixmap {
    let tree = resvg::usvg::Tree::from_str(svg, &resvg::usvg::Options::default()).expect("a valid SVG");
    let size = tree.size().to_int_size();
    let mut pix = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pix.as_mut());
    pix
}
