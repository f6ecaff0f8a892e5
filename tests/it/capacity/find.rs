//! `gpustack capacity find`: the ranked table against prices computed here from the
//! emulator's data (tests/emulator/data/prices.json, and the Capacity Block offerings read back
//! through the SDK), the missing options and why, the emitted block (valid, and planned as the
//! same offering), the `--for capacity` policy against the calls a search makes, bad input.

use std::collections::BTreeSet;

use crate::harness::{Env, REGION, block_on};

fn prices() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/emulator/data/prices.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn usd(v: &serde_json::Value) -> f64 {
    v.as_str().unwrap().parse().unwrap()
}

fn find_json(env: &Env, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["capacity", "find", "--json", "--regions", REGION];
    all.extend(args);
    let r = env.run(&all);
    // 2: nothing found, still a complete answer.
    assert!(r.code == 0 || r.code == 2, "{r:?}");
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn capacity_find_ranks_every_option_at_prices_from_the_emulator_data() {
    let env = Env::new();
    let j = find_json(&env, &["--instances", "2", "--types", "p5.48xlarge", "--hours", "24"]);
    let rows = j["options"].as_array().unwrap();
    let p = prices();
    let gpus = 16.0;

    // On-Demand: the data file's hourly rate × 2 instances × 24 h; per GPU-hour rate ÷ 8.
    let od = usd(&p["on_demand"][REGION]["p5.48xlarge"]["usd"]);
    let row = rows.iter().find(|r| r["option"] == "on-demand").expect("an On-Demand row");
    assert!(close(row["total_usd"].as_f64().unwrap(), od * 2.0 * 24.0), "{row}");
    assert!(close(row["usd_per_gpu_hour"].as_f64().unwrap(), od / 8.0), "{row}");

    // Spot: one row per zone the data prices, at that zone's rate.
    let spot = p["spot"][REGION]["p5.48xlarge"].as_object().expect("spot prices for p5.48xlarge");
    let spot_rows: Vec<_> = rows.iter().filter(|r| r["option"] == "spot").collect();
    assert_eq!(spot_rows.len(), spot.len(), "{spot_rows:?}");
    for (zone, price) in spot {
        let r =
            spot_rows.iter().find(|r| r["zone"] == zone.as_str()).unwrap_or_else(|| panic!("no spot row in {zone}"));
        assert!(close(r["total_usd"].as_f64().unwrap(), usd(price) * 2.0 * 24.0), "{r}");
        assert!(close(r["usd_per_gpu_hour"].as_f64().unwrap(), usd(price) / 8.0), "{r}");
        assert!(r["placement_score"].as_i64().is_some_and(|s| (1..=10).contains(&s)), "{r}");
    }

    // Capacity Blocks: each row is the cheapest offering of at least 24 h in its zone, as
    // DescribeCapacityBlockOfferings lists them, priced per GPU-hour over the block's hours.
    let ec2 = env.emu.ec2();
    let start = j["ask"]["start"].as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    let end = j["ask"]["end"].as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    let offers = block_on(async move {
        let out = ec2
            .describe_capacity_block_offerings()
            .instance_type("p5.48xlarge")
            .instance_count(2)
            .capacity_duration_hours(24)
            .start_date_range(aws_sdk_ec2::primitives::DateTime::from_secs(start.as_second()))
            .end_date_range(aws_sdk_ec2::primitives::DateTime::from_secs(end.as_second()))
            .send()
            .await
            .unwrap();
        out.capacity_block_offerings().to_vec()
    });
    let latest_start = end.as_second() - 24 * 3600;
    let blocks: Vec<_> = rows.iter().filter(|r| r["option"] == "capacity-block").collect();
    assert!(!blocks.is_empty(), "{j}");
    for b in &blocks {
        let zone = b["zone"].as_str().unwrap();
        let cheapest = offers
            .iter()
            .filter(|o| o.availability_zone() == Some(zone) && o.capacity_block_duration_hours().unwrap() >= 24)
            .filter(|o| o.start_date().unwrap().secs() <= latest_start)
            .map(|o| o.upfront_fee().unwrap().parse::<f64>().unwrap())
            .fold(f64::INFINITY, f64::min);
        let fee = b["total_usd"].as_f64().unwrap();
        assert!(close(fee, cheapest), "{b} vs the cheapest offering in {zone}: {cheapest}");
        let hours = b["hours"].as_f64().unwrap();
        assert!(close(b["usd_per_gpu_hour"].as_f64().unwrap(), fee / (gpus * hours)), "{b}");
    }
    assert!(rows.iter().any(|r| r["option"] == "training-plan"), "{j}");

    // Ranked cheapest per GPU-hour first, numbered from 1.
    let per: Vec<f64> = rows.iter().map(|r| r["usd_per_gpu_hour"].as_f64().unwrap()).collect();
    assert!(per.windows(2).all(|w| w[0] <= w[1]), "{per:?}");
    assert!(rows.iter().enumerate().all(|(i, r)| r["rank"].as_u64() == Some(i as u64 + 1)));

    // The table shows the same numbers.
    let text = env.ok(&[
        "capacity",
        "find",
        "--regions",
        REGION,
        "--instances",
        "2",
        "--types",
        "p5.48xlarge",
        "--hours",
        "24",
    ]);
    let od_line = text.stdout.lines().find(|l| l.contains("on-demand")).unwrap_or_else(|| panic!("{text:?}"));
    assert!(
        od_line.contains(&format!("{:.2}", od * 48.0)) && od_line.contains(&format!("{:.2}", od / 8.0)),
        "{od_line}"
    );
    assert!(text.stdout.contains("USD/GPU-h") && text.stdout.contains("  1  "), "{text:?}");
    assert!(text.stderr.contains("searching 1 type in 1 region"), "{text:?}");
}

#[test]
fn capacity_find_says_why_an_option_is_missing() {
    let env = Env::new();
    // The On-Demand P quota below 2 × 192 vCPUs; no Capacity Block offerings at all.
    env.emu.control("POST", "/_gpustack/quotas?code=L-417A185B&value=200");
    env.emu.control("POST", "/_gpustack/capacity/offerings?none=1");
    let j = find_json(&env, &["--instances", "2", "--types", "p5.48xlarge,p5e.48xlarge,g6e.12xlarge", "--hours", "24"]);
    let missing = j["missing"].as_array().unwrap();
    let why = |option: &str, t: &str| {
        missing
            .iter()
            .find(|m| m["option"] == option && m["instance_type"] == t)
            .unwrap_or_else(|| panic!("{option} {t} not listed as missing: {missing:?}"))
            .clone()
    };
    let quota = why("on-demand", "p5.48xlarge");
    assert_eq!(quota["reason"], "no-quota");
    assert!(
        quota["detail"].as_str().unwrap().contains("L-417A185B") && quota["detail"].as_str().unwrap().contains("384")
    );
    assert_eq!(why("capacity-block", "p5.48xlarge")["reason"], "no-offering");
    // p5e.48xlarge has no On-Demand price in the data: unpriced, never zero.
    assert_eq!(why("on-demand", "p5e.48xlarge")["reason"], "unpriced");
    assert!(j["options"].as_array().unwrap().iter().all(|r| r["total_usd"].as_f64().unwrap() > 0.0));
    assert_eq!(why("training-plan", "g6e.12xlarge")["reason"], "not-sold");

    // More instances than a block holds.
    let big = find_json(
        &env,
        &["--instances", "65", "--types", "p5.48xlarge", "--hours", "24", "--include", "capacity-blocks"],
    );
    assert_eq!(big["missing"][0]["reason"], "not-sold", "{big}");
    let text = env.run(&[
        "capacity",
        "find",
        "--regions",
        REGION,
        "--instances",
        "65",
        "--types",
        "p5.48xlarge",
        "--hours",
        "24",
        "--include",
        "capacity-blocks",
    ]);
    assert_eq!(text.code, 2, "nothing found exits 2: {text:?}");
    assert!(text.stdout.contains("Not available:") && text.stdout.contains("holds 1 to 64 instances"), "{text:?}");
}

#[test]
fn an_emitted_row_validates_and_plans_as_the_same_offering() {
    let env = Env::new();
    for include in ["capacity-blocks", "training-plans"] {
        let j = find_json(&env, &["--instances", "2", "--types", "p5.48xlarge", "--hours", "24", "--include", include]);
        let row = &j["options"][1];
        let emitted = env.ok(&[
            "capacity",
            "find",
            "--regions",
            REGION,
            "--instances",
            "2",
            "--types",
            "p5.48xlarge",
            "--hours",
            "24",
            "--include",
            include,
            "--emit",
            "toml",
            "--row",
            "2",
        ]);
        let stack = format!("[stack]\nname = \"cf\"\nregion = \"{REGION}\"\n\n{}", emitted.stdout);
        env.write("s.toml", &stack);
        env.ok(&["validate", "s.toml"]);
        let plan = env.ok(&["plan", "s.toml", "--json"]);
        let p: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
        let bought = &p["changes"][0]["purchase"];
        assert_eq!(bought["offering_id"], row["offering_id"], "{include}: {stack}\n{p}");
        assert!(close(bought["upfront_usd"].as_f64().unwrap(), row["total_usd"].as_f64().unwrap()), "{p}");
    }
    // Spot and On-Demand rows are not bought.
    let spot = env.run(&[
        "capacity",
        "find",
        "--regions",
        REGION,
        "--instances",
        "2",
        "--types",
        "p5.48xlarge",
        "--hours",
        "24",
        "--include",
        "on-demand",
        "--emit",
        "toml",
        "--row",
        "1",
    ]);
    assert_eq!(spot.code, 1, "{spot:?}");
    assert!(spot.stderr.contains("nothing to buy"), "{spot:?}");
}

#[test]
fn the_capacity_policy_allows_exactly_what_find_calls() {
    let env = Env::new();
    env.emu.reset_requests();
    find_json(&env, &["--gpus", "16", "--gpu", "h100", "--hours", "48"]);
    let called: BTreeSet<String> =
        env.emu.requests().into_iter().map(|(service, action)| format!("{service}:{action}")).collect();
    let policy = env.ok(&["policy", "--for", "capacity"]);
    let doc: serde_json::Value = serde_json::from_str(&policy.stdout).unwrap();
    let allowed: BTreeSet<String> = doc["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect();
    assert!(
        called.is_subset(&allowed),
        "called but not allowed: {:?}",
        called.difference(&allowed).collect::<Vec<_>>()
    );
    // Only the catalog read for types gpustack does not ship goes unused here, and the reads
    // of `capacity timeline` and `status` (tests/it/timeline checks those).
    let unused: Vec<_> = allowed.difference(&called).collect();
    assert_eq!(
        unused,
        [
            "autoscaling:DescribeAutoScalingGroups",
            "ec2:DescribeCapacityReservations",
            "ec2:DescribeInstanceTypes",
            "eks:DescribeNodegroup",
            "sagemaker:DescribeTrainingPlan"
        ],
        "{called:?}"
    );
    assert!(allowed.iter().all(|a| !a.contains(":Purchase") && !a.contains(":Create")), "{allowed:?}");
}

#[test]
fn capacity_find_refuses_bad_input_and_says_what_to_write() {
    let env = Env::new();
    let cases: &[(&[&str], &str)] = &[
        (&["--gpus", "8", "--gpu", "x999", "--hours", "24"], "has a GPU named `x999`; known: a100, a10g, b200"),
        (&["--gpus", "8", "--types", "p5.96xlarge", "--hours", "24"], "EC2 does not know instance type `p5.96xlarge`"),
        (&["--gpus", "8", "--types", "m6i.large", "--hours", "24"], "m6i.large has no GPUs"),
        (
            &["--gpus", "8", "--gpu", "h100", "--hours", "48", "--between", "2030-01-01", "2030-01-02"],
            "shorter than --hours 48",
        ),
        (&["--gpus", "8", "--gpu", "h100", "--hours", "24", "--between", "soon", "later"], "is not a time"),
        (&["--gpus", "8", "--gpu", "h100", "--hours", "24", "--emit", "toml", "--row", "9999"], "there is no row 9999"),
        (&["--gpu", "h100", "--hours", "24"], "--gpus <N>"),
    ];
    for (args, expected) in cases {
        let mut all = vec!["capacity", "find", "--regions", REGION];
        all.extend(*args);
        let r = env.run(&all);
        assert_ne!(r.code, 0, "{args:?}: {r:?}");
        assert!(r.stderr.contains(expected), "{args:?}: expected {expected:?} in {r:?}");
        assert!(!r.stderr.contains("panicked"), "{r:?}");
    }
    let r = env.run(&["capacity", "find", "--regions", "Oregon", "--gpus", "8", "--gpu", "h100", "--hours", "24"]);
    assert!(r.code == 1 && r.stderr.contains("not an AWS region name"), "{r:?}");
}

/// Review capfind M2 and M4: in each searched region, one `GetProducts` for every type
/// (`instanceType` `ANY_OF`; GetProducts has a token bucket of 10 per endpoint Region, which a
/// call per type per region overran: three US regions × 6 types sent 18 to us-east-1), and one
/// `GetSpotPlacementScores` for all the types (AWS scores fewer than 3 types always low).
#[test]
fn capacity_find_sends_one_price_and_one_score_request_per_region() {
    let env = Env::new();
    env.emu.reset_requests();
    let r = env.run(&[
        "capacity",
        "find",
        "--json",
        "--regions",
        "us-east-1,us-west-2,us-east-2",
        "--gpus",
        "16",
        "--types",
        "p5.48xlarge,p5e.48xlarge,p5en.48xlarge,p4d.24xlarge",
        "--hours",
        "24",
        "--include",
        "spot,on-demand",
    ]);
    assert!(r.code == 0 || r.code == 2, "{r:?}");
    let count = |action: &str| env.emu.requests().iter().filter(|(_, a)| a == action).count();
    assert_eq!(count("GetProducts"), 3, "{:?}", env.emu.requests());
    assert_eq!(count("GetSpotPlacementScores"), 3, "{:?}", env.emu.requests());
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let spot: Vec<_> = j["options"].as_array().unwrap().iter().filter(|r| r["option"] == "spot").collect();
    assert!(!spot.is_empty(), "{j}");
    for row in spot {
        if row["placement_score"].is_i64() {
            let notes = row["notes"].to_string();
            assert!(notes.contains("any of the 4 searched types"), "{row}");
        }
    }
}
