//! Unit tests of offering choice and the price guard: which Capacity Block offering a plan
//! proposes, which lengths a block may have, where an offering search looks, and what an
//! offline plan says of a purchase. No AWS: offerings are built with the SDK's builder, and
//! stacks go through the real load step.

use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::CapacityBlockOffering;

use super::{ended_plan_warnings, plan_zone_errors, price_offline, search_scope};
use crate::plan::{Action, Offer, Options, Refreshed};
use crate::resources::capacity_block::{purchase_of, valid_duration};
use crate::resources::offering::choose;
use crate::stack::{Source, Stack, VarSources};
use crate::value::{Attrs, Value};

/// An offering of 2× p5.48xlarge in `zone`, `hours` long from `start`, for `usd` up front.
fn offer(id: &str, hours: i32, usd: &str, start: &str, zone: &str) -> CapacityBlockOffering {
    let start: jiff::Timestamp = start.parse().expect("an RFC 3339 time");
    let secs = start.as_second();
    CapacityBlockOffering::builder()
        .capacity_block_offering_id(id)
        .instance_type("p5.48xlarge")
        .instance_count(2)
        .availability_zone(zone)
        .start_date(DateTime::from_secs(secs))
        .end_date(DateTime::from_secs(secs + i64::from(hours) * 3600))
        .capacity_block_duration_hours(hours)
        .upfront_fee(usd)
        .currency_code("USD")
        .build()
}

const DAY1: &str = "2026-12-01T11:30:00Z";
const DAY2: &str = "2026-12-02T11:30:00Z";
const DAY3: &str = "2026-12-03T11:30:00Z";

fn chosen(offers: &[CapacityBlockOffering], hours: i64) -> Option<String> {
    let purchases: Vec<_> = offers.iter().map(|o| purchase_of(o, &Attrs::new())).collect();
    choose(&purchases, hours).map(|p| p.offering_id.clone())
}

// ---- offering choice ----

#[test]
fn the_cheapest_offering_is_proposed() {
    let offers = [
        offer("cb-dear", 48, "9000.00", DAY1, "us-west-2a"),
        offer("cb-cheap", 48, "8000.00", DAY3, "us-west-2a"),
        offer("cb-middle", 48, "8500.00", DAY2, "us-west-2a"),
    ];
    assert_eq!(chosen(&offers, 48).as_deref(), Some("cb-cheap"), "cheapest even though it starts last");
    // Prices compare as numbers, not as text.
    let offers =
        [offer("cb-ten-thousand", 48, "10000", DAY1, "us-west-2a"), offer("cb-nine", 48, "9000", DAY1, "us-west-2a")];
    assert_eq!(chosen(&offers, 48).as_deref(), Some("cb-nine"));
}

#[test]
fn among_equally_cheap_offerings_the_earliest_is_proposed() {
    let offers = [
        offer("cb-day3", 48, "8000.00", DAY3, "us-west-2a"),
        offer("cb-day1", 48, "8000.00", DAY1, "us-west-2a"),
        offer("cb-day2", 48, "8000.00", DAY2, "us-west-2a"),
    ];
    assert_eq!(chosen(&offers, 48).as_deref(), Some("cb-day1"));
    // Same price and start: the zone decides, so the proposal does not depend on EC2's order.
    let b_first = [offer("cb-b", 48, "8000", DAY1, "us-west-2b"), offer("cb-a", 48, "8000", DAY1, "us-west-2a")];
    let a_first = [offer("cb-a", 48, "8000", DAY1, "us-west-2a"), offer("cb-b", 48, "8000", DAY1, "us-west-2b")];
    assert_eq!(chosen(&b_first, 48).as_deref(), Some("cb-a"));
    assert_eq!(chosen(&a_first, 48).as_deref(), Some("cb-a"));
}

#[test]
fn an_offering_shorter_than_asked_is_never_proposed() {
    // Blocks end at 11:30 UTC: for 48 h EC2 offers one a little shorter (cheaper) and one a
    // little longer.
    let offers =
        [offer("cb-short", 46, "7600.00", DAY1, "us-west-2a"), offer("cb-long", 50, "8300.00", DAY1, "us-west-2a")];
    assert_eq!(chosen(&offers, 48).as_deref(), Some("cb-long"));
    // Exactly as long as asked is long enough; asked for less, the cheaper one is fine.
    let exact = [offer("cb-exact", 48, "8000.00", DAY1, "us-west-2a")];
    assert_eq!(chosen(&exact, 48).as_deref(), Some("cb-exact"));
    assert_eq!(chosen(&offers, 46).as_deref(), Some("cb-short"));
}

#[test]
fn no_offering_long_enough_proposes_none() {
    assert_eq!(chosen(&[], 48), None);
    let short =
        [offer("cb-short", 46, "7600.00", DAY1, "us-west-2a"), offer("cb-day", 24, "4000.00", DAY1, "us-west-2a")];
    assert_eq!(chosen(&short, 48), None);
    // An offering without a length is not known to be long enough.
    let no_length = CapacityBlockOffering::builder().capacity_block_offering_id("cb-x").upfront_fee("1").build();
    assert_eq!(chosen(&[no_length], 24), None);
}

#[test]
fn an_offering_without_a_readable_price_is_proposed_last() {
    let offers =
        [offer("cb-unpriced", 48, "n/a", DAY1, "us-west-2a"), offer("cb-priced", 48, "9000.00", DAY2, "us-west-2a")];
    assert_eq!(chosen(&offers, 48).as_deref(), Some("cb-priced"));
    // Alone it is proposed at an infinite price, which any max_upfront_usd refuses.
    let alone = [offer("cb-unpriced", 48, "n/a", DAY1, "us-west-2a")];
    let alone: Vec<_> = alone.iter().map(|o| purchase_of(o, &Attrs::new())).collect();
    let p = choose(&alone, 48).expect("the only offering");
    assert!(p.upfront_usd.is_infinite() && p.upfront_usd > 1e12, "{p:?}");
}

#[test]
fn the_purchase_shows_the_offering_and_what_was_asked() {
    let inputs = Attrs::from([
        ("duration_hours".to_string(), Value::Int(48)),
        ("max_upfront_usd".to_string(), Value::Int(9000)),
    ]);
    let p = purchase_of(&offer("cb-0123", 50, "8312.40", DAY2, "us-west-2a"), &inputs);
    assert_eq!(p.offering_id, "cb-0123");
    assert_eq!(p.instance_type, "p5.48xlarge");
    assert_eq!(p.instance_count, 2);
    assert_eq!(p.availability_zone, "us-west-2a");
    assert_eq!(p.start, "2026-12-02T11:30:00Z");
    assert_eq!(p.end, "2026-12-04T13:30:00Z");
    assert_eq!((p.duration_hours, p.asked_hours), (50, 48));
    assert_eq!(p.upfront_usd, 8312.40);
    assert_eq!(p.currency, "USD");
    assert_eq!(p.max_upfront_usd, 9000.0);
    // A fractional guard is read as written; a currency EC2 leaves out is USD.
    let inputs = Attrs::from([("max_upfront_usd".to_string(), Value::Float(8312.39))]);
    let bare = CapacityBlockOffering::builder().capacity_block_offering_id("cb-1").upfront_fee("8312.40").build();
    let p = purchase_of(&bare, &inputs);
    assert_eq!(p.currency, "USD");
    assert!(p.upfront_usd > p.max_upfront_usd, "a cent over the guard is over: {p:?}");
}

// ---- durations ----

#[test]
fn a_block_lasts_whole_days_up_to_two_weeks_then_whole_weeks_up_to_26() {
    for (hours, valid) in [
        (24, true),
        (25, false),
        (48, true),
        (168, true),
        (336, true),
        (337, false),
        (360, false), // 15 days: past two weeks only whole weeks
        (504, true),
        (4368, true), // 26 weeks, 182 days
        (4369, false),
        (4536, false), // 27 weeks
        (0, false),
        (23, false),
        (-24, false),
    ] {
        assert_eq!(valid_duration(hours), valid, "{hours} h");
    }
}

/// A stack of a Capacity Block (with `block` lines) used by a node group in subnet `a`
/// (us-west-2a), and `more` (further resources).
fn stack(block: &str, more: &str) -> String {
    format!(
        r#"[stack]
name   = "buy"
region = "us-west-2"

[vpc.main]
cidr_block       = "10.9.0.0/16"
internet_gateway = true

[subnet.a]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.9.0.0/20"
availability_zone = "us-west-2a"
nat_gateway       = "${{nat_gateway.out.id}}"

[subnet.b]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.9.16.0/20"
availability_zone = "us-west-2b"
public            = true

[nat_gateway.out]
subnet = "${{subnet.b.id}}"

[eks_cluster.main]
version             = "1.33"
role                = "arn:aws:iam::123456789012:role/cluster"
subnets             = ["${{subnet.a.id}}", "${{subnet.b.id}}"]
public_access_cidrs = ["203.0.113.0/24"]

[capacity_block.train]
instance_type   = "p5.48xlarge"
instance_count  = 2
start_after     = "2026-12-01T00:00:00Z"
start_before    = "2026-12-08T00:00:00Z"
max_upfront_usd = 8000
{block}

[launch_template.p5]
instance_type        = "p5.48xlarge"
capacity_reservation = "${{capacity_block.train.id}}"
market               = "capacity-block"
data_volume          = {{ size_gib = 500 }}

[node_group.train]
cluster         = "${{eks_cluster.main.name}}"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["${{subnet.a.id}}"]
launch_template = "${{launch_template.p5.id}}"
capacity_type   = "CAPACITY_BLOCK"
scaling         = {{ min = 0, desired = 2, max = 2 }}
{more}"#
    )
}

fn load(text: &str) -> Result<Stack, Vec<(String, String)>> {
    let vars = VarSources { cli: &[], env: &|_| None };
    crate::load::check(Source::new("t.toml", text.into()), &vars).map_err(|d| {
        let line = |s: &Option<std::ops::Range<usize>>| {
            s.as_ref().map_or(String::new(), |s| {
                let (l, _) = d.source.line_col(s.start);
                d.source.text.lines().nth(l - 1).unwrap_or_default().trim().to_string()
            })
        };
        d.items.iter().map(|i| (i.message.clone(), line(&i.span))).collect()
    })
}

fn accepted(text: &str) -> Stack {
    load(text).unwrap_or_else(|e| panic!("the load step refused the stack: {e:#?}\n{text}"))
}

#[test]
fn a_block_length_that_ec2_does_not_sell_is_refused_where_it_is_written() {
    let refused = load(&stack("duration_hours = 25", "")).err().expect("25 h is refused");
    let (message, at) = refused
        .iter()
        .find(|(m, _)| m.contains("duration_hours"))
        .unwrap_or_else(|| panic!("no duration error: {refused:#?}"));
    assert_eq!(message, "`duration_hours` = 25 is not a Capacity Block length");
    assert_eq!(at, "duration_hours = 25");
    for ok in [24, 336, 504, 4368] {
        accepted(&stack(&format!("duration_hours = {ok}"), ""));
    }
    assert!(load(&stack("duration_hours = 337", "")).is_err());
}

// ---- where the search looks ----

/// The block's literal attributes, as an offering search gets them.
fn block_inputs(stack: &Stack) -> Attrs {
    let r = stack.get("capacity_block.train").expect("the block");
    r.attrs.keys().filter_map(|k| Some((k.clone(), crate::rules::lit(r, k)?))).collect()
}

fn search(text: &str) -> (Attrs, String) {
    search_in(accepted(text))
}

fn search_in(stack: Stack) -> (Attrs, String) {
    let r = stack.get("capacity_block.train").expect("the block");
    let (inputs, _, note) = search_scope(&stack, r, block_inputs(&stack), &Default::default());
    (inputs, note)
}

fn zone(inputs: &Attrs) -> Option<&str> {
    inputs.get("availability_zone").and_then(Value::as_str)
}

#[test]
fn a_block_without_a_zone_is_searched_in_the_zone_of_its_node_groups() {
    let (inputs, note) = search(&stack("duration_hours = 48", ""));
    assert_eq!(zone(&inputs), Some("us-west-2a"));
    assert_eq!(note, " (searched in us-west-2a, the zone of node_group.train)");
    // The rest of the search is the block's.
    assert_eq!(inputs.get("instance_type").and_then(Value::as_str), Some("p5.48xlarge"));
    assert_eq!(inputs.get("duration_hours").and_then(Value::as_int), Some(48));

    // The block's own zone is kept, and no note says otherwise.
    let (inputs, note) = search(&stack("duration_hours = 48\navailability_zone = \"us-west-2a\"", ""));
    assert_eq!(zone(&inputs), Some("us-west-2a"));
    assert_eq!(note, "");
}

#[test]
fn a_block_whose_node_groups_span_zones_or_that_no_group_uses_is_searched_everywhere() {
    // A second group in another zone on the same block: no one zone to search in.
    let other = r#"
[node_group.other]
cluster         = "${eks_cluster.main.name}"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["${subnet.b.id}"]
launch_template = "${launch_template.p5.id}"
capacity_type   = "CAPACITY_BLOCK"
scaling         = { min = 0, desired = 0, max = 2 }
"#;
    // Read by the language alone: the offline rules refuse such a stack (shared_blocks), but
    // the search must not depend on that.
    let vars = VarSources { cli: &[], env: &|_| None };
    let source = Source::new("t.toml", stack("duration_hours = 48", other));
    let (spread, _) = Stack::parse(source, &vars, &crate::resources::schemas()).expect("the language accepts it");
    // Searched in both (an offering elsewhere is dropped), with no one zone to ask EC2 for.
    let (inputs, note) = search_in(spread);
    assert_eq!(zone(&inputs), None);
    assert_eq!(note, " (searched in us-west-2a, us-west-2b, the zones of node_group.train, node_group.other)");

    // Two groups in the same zone: that zone, and the note names both (in stack order).
    // (A block of 4, so the two groups' maxima fit it together.)
    let same = other.replace("subnet.b.id", "subnet.a.id");
    let (inputs, note) =
        search(&stack("duration_hours = 48", &same).replace("instance_count  = 2", "instance_count  = 4"));
    assert_eq!(zone(&inputs), Some("us-west-2a"));
    assert_eq!(note, " (searched in us-west-2a, the zone of node_group.train, node_group.other)");

    // A block no group uses (bought ahead, say): every zone.
    let text = stack("duration_hours = 48", "").replace("capacity_type   = \"CAPACITY_BLOCK\"\n", "").replace(
        "capacity_reservation = \"${capacity_block.train.id}\"\nmarket               = \"capacity-block\"\n",
        "",
    );
    let (inputs, note) = search(&text);
    assert_eq!((zone(&inputs), note.as_str()), (None, ""));
}

// ---- the offline plan ----

/// The plan of `text` on an empty state without AWS, priced offline: what the block shows.
fn offline_purchase(text: &str) -> Action {
    let stack = accepted(text);
    let opts = Options { destroy: false, targets: &[] };
    let mut plan = crate::plan::diff(&stack, None, &Refreshed::skipped(), &opts).expect("a plan");
    let before = plan.changes.iter().find(|c| c.address == "capacity_block.train").expect("the block").action.clone();
    assert_eq!(before, Action::Purchase(Offer::NotSearched));
    price_offline(&stack, &mut plan);
    for c in plan.changes.iter().filter(|c| c.address != "capacity_block.train") {
        assert!(!matches!(c.action, Action::Purchase(_)), "only the block is a purchase: {c:?}");
    }
    plan.changes.into_iter().find(|c| c.address == "capacity_block.train").expect("the block").action
}

#[test]
fn offline_a_block_is_a_purchase_that_a_refreshing_plan_will_look_up() {
    let Action::Purchase(Offer::Offline(note)) = offline_purchase(&stack("duration_hours = 48", "")) else {
        panic!("an offline purchase")
    };
    assert_eq!(
        note,
        "2× p5.48xlarge in us-west-2a, 48 h starting between 2026-12-01T00:00:00Z and 2026-12-08T00:00:00Z: offering and price not looked up (--refresh=false); a refreshing plan searches them (max 8000 USD)"
    );
    // The block's own zone is the one named.
    let Action::Purchase(Offer::Offline(note)) =
        offline_purchase(&stack("duration_hours = 48\navailability_zone = \"us-west-2a\"", ""))
    else {
        panic!("an offline purchase")
    };
    assert!(note.starts_with("2× p5.48xlarge in us-west-2a, 48 h "), "{note}");
}

#[test]
fn offline_a_block_with_no_zone_to_search_names_none() {
    let text = stack("duration_hours = 336", "").replace("capacity_type   = \"CAPACITY_BLOCK\"\n", "").replace(
        "capacity_reservation = \"${capacity_block.train.id}\"\nmarket               = \"capacity-block\"\n",
        "",
    );
    let Action::Purchase(Offer::Offline(note)) = offline_purchase(&text) else { panic!("an offline purchase") };
    assert_eq!(
        note,
        "2× p5.48xlarge, 336 h starting between 2026-12-01T00:00:00Z and 2026-12-08T00:00:00Z: offering and price not looked up (--refresh=false); a refreshing plan searches them (max 8000 USD)"
    );
}

// ---- a training plan's zone before it is bought ----

/// `stack` plus a training plan (`plan` lines) used by a HyperPod cluster on `subnets`, and
/// a subnet `c` whose zone is another subnet's output (not known before apply).
fn hyperpod_stack(plan: &str, subnets: &str) -> Stack {
    accepted(&stack(
        "duration_hours = 24",
        &format!(
            r#"
[subnet.c]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.9.32.0/20"
availability_zone = "${{subnet.a.availability_zone}}"
nat_gateway       = "${{nat_gateway.out.id}}"

[training_plan.tp]
instance_type   = "ml.p5.48xlarge"
instance_count  = 1
duration_hours  = 24
start_after     = "2026-12-01T00:00:00Z"
start_before    = "2026-12-08T00:00:00Z"
max_upfront_usd = 40000
{plan}

[hyperpod_cluster.hp]
eks_cluster     = "${{eks_cluster.main.arn}}"
subnets         = {subnets}
security_groups = ["sg-0123456789abcdef0"]

[hyperpod_cluster.hp.instance_groups.g]
instance_type  = "ml.p5.48xlarge"
instance_count = 1
execution_role = "arn:aws:iam::123456789012:role/hyperpod"
lifecycle      = {{ source_s3_uri = "s3://sagemaker-lc/", on_create = "on_create.sh" }}
training_plan  = "${{training_plan.tp.arn}}"
"#
        ),
    ))
}

fn zone_errors(stack: &Stack, pinned: Option<&str>, known: &[(&str, &str)]) -> Vec<String> {
    let r = stack.get("training_plan.tp").expect("the plan");
    let known = known.iter().map(|(s, z)| (s.to_string(), z.to_string())).collect();
    plan_zone_errors(stack, r, pinned, &known).into_iter().map(|d| d.message).collect()
}

/// MAJOR-1 (review r18): an unknown zone never means "anywhere": a cluster subnet whose zone
/// is only known after apply refuses the purchase unless the plan pins its zone.
#[test]
fn a_plan_whose_clusters_zone_is_unknown_is_not_bought_unless_pinned() {
    let s = hyperpod_stack("", r#"["${subnet.c.id}"]"#);
    let e = zone_errors(&s, None, &[]);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("the zone of its cluster `hyperpod_cluster.hp` is not known before apply (subnet.c)"),
        "{e:?}"
    );
    assert!(zone_errors(&s, Some("us-west-2a"), &[]).is_empty());
    // A literal id DescribeSubnets did not resolve is as unknown.
    let s = hyperpod_stack("", r#"["subnet-0aaa"]"#);
    assert_eq!(zone_errors(&s, None, &[]).len(), 1);
    assert!(zone_errors(&s, None, &[("subnet-0aaa", "us-west-2a")]).is_empty());
}

/// MAJOR-1 (review r18): stack subnets and literal ids resolved by DescribeSubnets are one zone
/// set: two zones, or a pin elsewhere, refuse the purchase.
#[test]
fn a_plan_is_not_bought_when_its_clusters_subnets_span_zones_or_differ_from_the_pin() {
    let s = hyperpod_stack("", r#"["${subnet.a.id}", "subnet-0bbb"]"#);
    let e = zone_errors(&s, None, &[("subnet-0bbb", "us-west-2b")]);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("has subnets in us-west-2a and us-west-2b"), "{e:?}");
    assert!(zone_errors(&s, None, &[("subnet-0bbb", "us-west-2a")]).is_empty());
    let e = zone_errors(&s, Some("us-west-2c"), &[("subnet-0bbb", "us-west-2a")]);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("it is pinned to us-west-2c but its cluster `hyperpod_cluster.hp` has its subnets in us-west-2a")
    );
}

/// Review r18 minor-5: the plan-ended warning uses the bought plan's recorded `end_date` and
/// `state`, not only the latest end its window allows.
#[test]
fn a_bought_plan_that_ended_by_its_recorded_end_date_or_state_is_warned_about() {
    let s = hyperpod_stack("", r#"["${subnet.a.id}"]"#);
    let now: jiff::Timestamp = "2026-12-03T00:00:00Z".parse().unwrap();
    let warn = |end: &str, state: &str| {
        let (end, state) = (end.to_string(), state.to_string());
        let out = move |a: &str, k: &str| match (a, k) {
            ("training_plan.tp", "end_date") if !end.is_empty() => Some(end.clone()),
            ("training_plan.tp", "state") => Some(state.clone()),
            _ => None,
        };
        ended_plan_warnings(&s, &out, now).into_iter().map(|d| d.message).collect::<Vec<_>>()
    };
    // The window allows an end up to 2026-12-09: the recorded end decides.
    let ended = warn("2026-12-02T11:30:00Z", "Active");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(ended[0].contains("`hyperpod_cluster.hp` runs on `training_plan.tp`, which ended 2026-12-02T11:30:00Z"));
    assert!(warn("2026-12-04T11:30:00Z", "Active").is_empty());
    assert_eq!(warn("", "Expired").len(), 1);
}
