//! Cost in every plan (issue 22): each group at its desired and max size, an ODCR's idle part,
//! purchases up front, the totals line, the JSON `cost` object, the price source (live or the
//! embedded snapshot), unpriced items (never 0) and a failed price read. Expected numbers are
//! computed here from the emulator's price data (tests/emulator/data/prices.json), not from
//! gpustack's code.

use serde_json::Value as Json;

use crate::harness::Env;

/// The emulator's price data file.
fn prices() -> Json {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/emulator/data/prices.json"))
        .expect("read tests/emulator/data/prices.json");
    serde_json::from_str(&text).unwrap()
}

fn on_demand(p: &Json, region: &str, t: &str) -> f64 {
    p["on_demand"][region][t]["usd"].as_str().unwrap_or_else(|| panic!("no {t} in {region}")).parse().unwrap()
}

fn spot(p: &Json, region: &str, zone: &str, t: &str) -> f64 {
    p["spot"][region][t][zone].as_str().unwrap_or_else(|| panic!("no spot {t} in {zone}")).parse().unwrap()
}

/// A cluster with an On-Demand system group (2/3 × m6i.large), a Spot group (2/5 × g6.xlarge or
/// g5.xlarge in us-west-2a and b), a group (1/3) on a 4 × g6.2xlarge ODCR, and a group of a type
/// the price data lacks (m6i.2xlarge). `region` and its zones replace us-west-2's.
fn stack(name: &str, region: &str) -> String {
    let s = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/inference.toml")).unwrap();
    let s = &s[..s.find("# GPU pool").unwrap()];
    let s = s.replace("name   = \"infer-${var.env}\"", &format!("name   = \"{name}\""));
    let s = s + r#"
[node_group.spot]
cluster        = "${eks_cluster.main.name}"
node_role      = "${iam_role.node.arn}"
subnets        = ["${subnet.a.id}", "${subnet.b.id}"]
capacity_type  = "SPOT"
instance_types = ["g6.xlarge", "g5.xlarge"]
scaling        = { min = 1, desired = 2, max = 5 }

[capacity_reservation.odcr]
instance_type     = "g6.2xlarge"
availability_zone = "us-west-2a"
instance_count    = 4
end_date          = "2030-01-01T00:00:00Z"

[launch_template.odcr]
instance_type        = "g6.2xlarge"
capacity_reservation = "${capacity_reservation.odcr.id}"
data_volume          = { size_gib = 100 }

[node_group.reserved]
cluster         = "${eks_cluster.main.name}"
node_role       = "${iam_role.node.arn}"
subnets         = ["${subnet.a.id}"]
launch_template = "${launch_template.odcr.id}"
scaling         = { min = 1, desired = 1, max = 3 }

[node_group.unpriced]
cluster        = "${eks_cluster.main.name}"
node_role      = "${iam_role.node.arn}"
subnets        = ["${subnet.a.id}"]
instance_types = ["m6i.2xlarge"]
scaling        = { min = 1, desired = 1, max = 2 }
"#;
    s.replace("us-west-2", region)
}

fn item<'a>(cost: &'a Json, address: &str) -> &'a Json {
    cost["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["address"] == address)
        .unwrap_or_else(|| panic!("{address} in {cost}"))
}

fn close(a: &Json, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-6)
}

#[test]
fn a_plan_prices_every_group_the_odcrs_idle_part_and_says_what_is_unpriced() {
    let env = Env::new();
    env.write("c.toml", &stack("cost", "us-west-2"));
    let p = prices();
    let r = "us-west-2";
    let system = on_demand(&p, r, "m6i.large");
    let spot_unit = ["g6.xlarge", "g5.xlarge"]
        .iter()
        .flat_map(|t| ["us-west-2a", "us-west-2b"].map(|z| spot(&p, r, z, t)))
        .fold(0.0, f64::max);
    let reserved = on_demand(&p, r, "g6.2xlarge");

    let j: Json = serde_json::from_str(&env.ok(&["plan", "c.toml", "--json"]).stdout).unwrap();
    let cost = &j["cost"];
    assert!(
        cost["source"].as_str().unwrap().starts_with("AWS Price List (On-Demand) and EC2 Spot price history, fetched "),
        "{cost}"
    );

    let sys = item(cost, "node_group.system");
    assert_eq!(sys["market"], "on-demand");
    assert!(close(&sys["unit_usd_per_hour"], system), "{sys}");
    assert!(close(&sys["now_usd_per_hour"], 2.0 * system) && close(&sys["max_usd_per_hour"], 3.0 * system), "{sys}");
    let sp = item(cost, "node_group.spot");
    assert_eq!(sp["market"], "spot");
    assert!(close(&sp["now_usd_per_hour"], 2.0 * spot_unit) && close(&sp["max_usd_per_hour"], 5.0 * spot_unit), "{sp}");
    let res = item(cost, "node_group.reserved");
    assert!(close(&res["now_usd_per_hour"], reserved) && close(&res["max_usd_per_hour"], 3.0 * reserved), "{res}");
    // The ODCR bills 4 whether used or not: its line adds the idle part, 3 now and 1 at max.
    let odcr = item(cost, "capacity_reservation.odcr");
    assert_eq!(odcr["market"], "capacity-reservation");
    assert!(close(&odcr["now_usd_per_hour"], 3.0 * reserved) && close(&odcr["max_usd_per_hour"], reserved), "{odcr}");
    // A type the price data lacks is unpriced: null, never 0, and named in the totals.
    let un = item(cost, "node_group.unpriced");
    assert!(un["now_usd_per_hour"].is_null() && un["max_usd_per_hour"].is_null(), "{un}");
    assert!(un["unpriced"].as_str().unwrap().contains("m6i.2xlarge"), "{un}");
    assert_eq!(cost["unpriced"], serde_json::json!(["node_group.unpriced"]));

    // With an unpriced item the totals are unknown (null, never a sum that reads as complete);
    // the priced parts are lower bounds.
    let now = 2.0 * system + 2.0 * spot_unit + reserved + 3.0 * reserved;
    let max = 3.0 * system + 5.0 * spot_unit + 3.0 * reserved + reserved;
    assert!(cost["now_usd_per_hour"].is_null() && cost["max_usd_per_hour"].is_null(), "{cost}");
    assert_eq!(cost["complete"], false, "{cost}");
    assert!(close(&cost["priced_now_usd_per_hour"], now) && close(&cost["priced_max_usd_per_hour"], max), "{cost}");
    assert!(cost["upfront_usd"].is_null() || close(&cost["upfront_usd"], 0.0), "{cost}");
    assert_eq!(cost["on_demand_prices_of"], "us-west-2");

    // The text plan: the lines and the summary line with the same numbers.
    let text = env.ok(&["plan", "c.toml"]).stdout;
    let dollars = |v: f64| format!("${:.2}", v);
    let summary = format!(
        "≥ {}/h now, up to ≥ {}/h at max (excluding 1 unpriced item: node_group.unpriced)",
        dollars(now),
        dollars(max)
    );
    assert!(text.contains(&summary), "{summary}\n{text}");
    assert!(
        text.contains("Cost (USD; prices: AWS Price List (On-Demand) and EC2 Spot price history, fetched "),
        "{text}"
    );
    assert!(
        text.contains("billed whether used or not; `node_group.reserved` runs 1 on it now, up to 3 at max"),
        "{text}"
    );
    assert!(
        text.contains(&format!("idle: 3 now ({}/h), 1 at max ({}/h)", dollars(3.0 * reserved), dollars(reserved))),
        "{text}"
    );
}

#[test]
fn prices_are_read_in_one_batch_per_plan() {
    let env = Env::new();
    env.write("c.toml", &stack("batch", "us-west-2"));
    env.emu.reset_requests();
    env.ok(&["plan", "c.toml"]);
    let reqs = env.emu.requests();
    let count = |s: &str, a: &str| reqs.iter().filter(|(sv, ac)| sv == s && ac == a).count();
    // One GetProducts for the five types (m6i.large, g6.xlarge, g5.xlarge, g6.2xlarge,
    // m6i.2xlarge: an instanceType ANY_OF filter, review capfind M2) and one Spot history listing
    // for all of them.
    assert_eq!(count("pricing", "GetProducts"), 1, "{reqs:?}");
    assert_eq!(count("ec2", "DescribeSpotPriceHistory"), 1, "{reqs:?}");
    // The Price List is read at its us-east-1 endpoint, not the stack's region (there is no
    // api.pricing endpoint in us-west-2; the emulator refuses a request scoped to it).
    let log = env.emu.control("GET", "/_gpustack/requests");
    let regions: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["service"] == "pricing")
        .filter_map(|r| r["region"].as_str())
        .collect();
    assert!(regions.len() == 1 && regions.iter().all(|r| *r == "us-east-1"), "{regions:?}");
}

#[test]
fn an_offline_plan_prices_from_the_embedded_snapshot_and_names_it() {
    let env = Env::new();
    // The snapshot holds us-east-1 On-Demand prices (the emulator's data has the same rates).
    env.write("e.toml", &stack("offline", "us-east-1"));
    let p = prices();
    let j: Json = serde_json::from_str(&env.ok(&["plan", "e.toml", "--json", "--refresh=false"]).stdout).unwrap();
    let cost = &j["cost"];
    let source = cost["source"].as_str().unwrap();
    assert!(source.starts_with("embedded snapshot 2026-07-20 from the AWS Price List"), "{source}");
    let sys = item(cost, "node_group.system");
    assert!(close(&sys["now_usd_per_hour"], 2.0 * on_demand(&p, "us-east-1", "m6i.large")), "{sys}");
    // Spot prices change every few minutes: the snapshot has none, so Spot is unpriced.
    let sp = item(cost, "node_group.spot");
    assert!(sp["now_usd_per_hour"].is_null() && sp["unpriced"].is_string(), "{sp}");
    let text = env.ok(&["plan", "e.toml", "--refresh=false"]).stdout;
    assert!(text.contains("Cost (USD; prices: embedded snapshot 2026-07-20 from "), "{text}");
    assert!(text.contains("(excluding 1 unpriced item: node_group.spot)"), "{text}");
    assert!(!text.contains("$0.00/h now"), "{text}");
    // A region the snapshot lacks is priced at us-east-1 list prices, as Karpenter's offline
    // table falls back, and the plan says exactly that (the JSON names the region used).
    env.write("w.toml", &stack("offline", "us-west-2"));
    let j: Json = serde_json::from_str(&env.ok(&["plan", "w.toml", "--json", "--refresh=false"]).stdout).unwrap();
    let cost = &j["cost"];
    assert_eq!(cost["on_demand_prices_of"], "us-east-1", "{cost}");
    let sys = item(cost, "node_group.system");
    assert!(close(&sys["now_usd_per_hour"], 2.0 * on_demand(&p, "us-east-1", "m6i.large")), "{sys}");
    assert!(sys["note"].as_str().unwrap().contains("us-east-1 On-Demand list price used for us-west-2"), "{sys}");
    let text = env.ok(&["plan", "w.toml", "--refresh=false"]).stdout;
    assert!(text.contains("us-east-1 On-Demand list prices used for us-west-2"), "{text}");
}

#[test]
fn a_failed_price_read_leaves_items_unpriced_and_the_plan_goes_on() {
    let env = Env::new();
    env.write("c.toml", &stack("lost", "us-west-2"));
    // The Price List endpoint answers nothing (a closed port): one attempt, then unpriced.
    let mut cmd = env.command(&["plan", "c.toml", "--json"]);
    cmd.env("AWS_ENDPOINT_URL_PRICING", "http://127.0.0.1:9").env("AWS_MAX_ATTEMPTS", "1");
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Json = serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let cost = &j["cost"];
    assert!(cost["problems"][0].as_str().unwrap().contains("GetProducts failed"), "{cost}");
    let sys = item(cost, "node_group.system");
    assert!(sys["now_usd_per_hour"].is_null(), "never 0: {sys}");
    // Spot prices came from EC2 and still price the Spot group.
    assert!(item(cost, "node_group.spot")["now_usd_per_hour"].as_f64().unwrap() > 0.0, "{cost}");
}

#[test]
fn a_purchase_is_priced_up_front_in_the_totals() {
    let env = Env::new();
    let start = |days: i64| {
        let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days);
        t.round(jiff::Unit::Second).unwrap().to_string()
    };
    env.write(
        "b.toml",
        &format!(
            r#"[stack]
name   = "buy"
region = "us-west-2"

[capacity_block.train]
instance_type     = "p5.48xlarge"
instance_count    = 1
duration_hours    = 24
start_after       = "{}"
start_before      = "{}"
availability_zone = "us-west-2b"
max_upfront_usd   = 40000
"#,
            start(1),
            start(6)
        ),
    );
    let j: Json = serde_json::from_str(&env.ok(&["plan", "b.toml", "--json"]).stdout).unwrap();
    let upfront = j["changes"][0]["purchase"]["upfront_usd"].as_f64().unwrap();
    let cost = &j["cost"];
    assert!(close(&cost["upfront_usd"], upfront) && upfront > 0.0 && cost["complete"] == true, "{cost}");
    assert!(close(&item(cost, "capacity_block.train")["upfront_usd"], upfront), "{cost}");
    let text = env.ok(&["plan", "b.toml"]).stdout;
    let thousands = |v: f64| {
        let cents = format!("{:.2}", v);
        let (whole, frac) = cents.split_once('.').unwrap();
        let mut g = String::new();
        for (i, ch) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i) % 3 == 0 {
                g.push(',');
            }
            g.push(ch);
        }
        format!("${g}.{frac}")
    };
    assert!(
        text.contains(&format!("≈ $0.00/h now, up to $0.00/h at max; {} up front, non-refundable", thousands(upfront))),
        "{text}"
    );
}

#[test]
fn the_policy_allows_the_price_reads_a_priced_stack_makes() {
    let env = Env::new();
    env.write("c.toml", &stack("pol", "us-west-2"));
    let out = env.ok(&["policy", "c.toml"]).stdout;
    let doc: Json = serde_json::from_str(&out).unwrap();
    let st = doc["Statement"].as_array().unwrap();
    let list = st.iter().find(|s| s["Sid"] == "PriceList").expect("PriceList");
    assert_eq!(list["Action"], serde_json::json!(["pricing:GetProducts"]));
    assert_eq!(list["Condition"]["StringEquals"]["aws:RequestedRegion"], "us-east-1");
    assert!(st.iter().any(|s| s["Sid"] == "SpotPriceHistory"), "{doc}");
}
