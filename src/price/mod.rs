//! Prices of EC2 instances, for the cost a plan shows (issue 22) and for `capacity find` /
//! `status` / `capacity timeline`: a [`PriceBook`] read once per run, either live (the AWS
//! Price List Query API for On-Demand, EC2 Spot price history for Spot) or from the snapshot
//! embedded in the binary (`snapshot.json`, for `--refresh=false`). The book knows its
//! source, and a price it does not have is `None` ("unpriced"), never 0.
//!
//! Sources (docs/aws-facts-pricing-capacity.md):
//! - `pricing:GetProducts` (botocore `pricing/2017-10-15`): `ServiceCode` `AmazonEC2`,
//!   `TERM_MATCH` filters, each `PriceList` item a JSON document in a string whose hourly price
//!   is `terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD` (botocore `examples-1.json`;
//!   Karpenter `pkg/providers/pricing/pricing.go` reads the same path with the same filters).
//! - The Price List "doesn't include Amazon EC2 Spot Instances" (Billing UG, "Calling AWS
//!   services and prices using the AWS Price List"): Spot comes from
//!   `ec2:DescribeSpotPriceHistory` with `StartTime` = now, which "also returns the last price
//!   change before the start time, which is the effective price as of the start time"
//!   (botocore op doc), per zone.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde::Deserialize;

use crate::aws::{Ctx, Service};

/// US dollars.
pub type Usd = f64;

/// The Price List Query API endpoint for prices of `region`: the API has endpoints in
/// `us-east-1`, `eu-central-1` and `ap-south-1` in the `aws` partition and `cn-northwest-1` in
/// China (botocore `endpoints.json`, service `api.pricing`; Billing UG `using-pelong`: "The
/// endpoints aren't related to product or service attributes", any endpoint prices any
/// region). The nearest is picked by prefix, as Karpenter's `NewAPI` does.
pub fn endpoint_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// The On-Demand and Spot hourly prices of some instance types, and where they came from.
#[derive(Clone, Debug, Default)]
pub struct PriceBook {
    source: String,
    /// (region, instance type) → USD per hour, On-Demand, Linux, shared tenancy.
    on_demand: BTreeMap<(String, String), Usd>,
    /// (region, zone, instance type) → USD per hour, Spot, Linux/UNIX.
    spot: BTreeMap<(String, String, String), Usd>,
    /// What could not be read (an operation refused), for the plan to say.
    problems: Vec<String>,
    /// The regions the book holds On-Demand prices for (the snapshot's), to say why a price
    /// is missing.
    regions: BTreeSet<String>,
    /// Regions priced with another region's list prices ([`PriceBook::embedded_for`]):
    /// region → the region whose prices are used.
    borrowed: BTreeMap<String, String>,
}

/// The embedded snapshot's layout (`src/price/snapshot.json`).
#[derive(Deserialize)]
struct Snapshot {
    date: String,
    source: String,
    on_demand: BTreeMap<String, BTreeMap<String, Usd>>,
    #[serde(default)]
    spot: BTreeMap<String, BTreeMap<String, BTreeMap<String, Usd>>>,
}

const SNAPSHOT: &str = include_str!("snapshot.json");

/// The product description of Linux Spot prices; EC2 answers `Linux/UNIX` for instances in a
/// VPC too (response enum `RIProductDescription`; Karpenter asks for both).
const LINUX: [&str; 2] = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"];

impl PriceBook {
    /// A book with no price, saying why (prices were not read).
    pub fn none(source: impl Into<String>) -> PriceBook {
        PriceBook { source: source.into(), ..PriceBook::default() }
    }

    /// The snapshot embedded in the binary: On-Demand prices only (Spot prices change every few
    /// minutes and have no price list), for `--refresh=false`.
    pub fn embedded() -> PriceBook {
        // The snapshot is checked by a unit test; a broken one prices nothing rather than panic.
        let Ok(s) = serde_json::from_str::<Snapshot>(SNAPSHOT) else {
            return PriceBook::none("embedded price snapshot (unreadable)");
        };
        let mut book =
            PriceBook { source: format!("embedded snapshot {} from {}", s.date, s.source), ..PriceBook::default() };
        for (region, types) in s.on_demand {
            book.regions.insert(region.clone());
            for (t, usd) in types {
                book.insert_on_demand(&region, &t, usd);
            }
        }
        for (region, zones) in s.spot {
            for (zone, types) in zones {
                for (t, usd) in types {
                    book.insert_spot(&region, &zone, &t, usd);
                }
            }
        }
        book
    }

    /// The embedded snapshot for a plan in `region`. When the snapshot has no prices of
    /// `region`, its us-east-1 list prices stand in for them, as Karpenter's own offline table
    /// does ("fall back to the always available us-east-1": karpenter-provider-aws
    /// `pkg/providers/pricing/pricing.go`, `Reset`); the source says so and
    /// [`PriceBook::list_region`] names the region whose prices are used.
    pub fn embedded_for(region: &str) -> PriceBook {
        const FALLBACK: &str = "us-east-1";
        let mut book = PriceBook::embedded();
        if book.knows_region(region) || !book.knows_region(FALLBACK) {
            return book;
        }
        let rows: Vec<(String, Usd)> =
            book.on_demand.iter().filter(|((r, _), _)| r == FALLBACK).map(|((_, t), usd)| (t.clone(), *usd)).collect();
        for (t, usd) in rows {
            book.insert_on_demand(region, &t, usd);
        }
        book.regions.insert(region.to_string());
        book.borrowed.insert(region.to_string(), FALLBACK.to_string());
        book.source = format!(
            "{}; {FALLBACK} On-Demand list prices used for {region} (the snapshot holds no {region} prices; Karpenter falls back to {FALLBACK} likewise)",
            book.source
        );
        book
    }

    /// The region whose On-Demand list prices the book uses for `region`: itself, or the
    /// snapshot's us-east-1 when [`PriceBook::embedded_for`] fell back to it.
    pub fn list_region<'a>(&'a self, region: &'a str) -> &'a str {
        self.borrowed.get(region).map_or(region, String::as_str)
    }

    /// On-Demand (`pricing:GetProducts`, one call for all the types: [`on_demand`]) and Spot (`ec2:DescribeSpotPriceHistory`, one listing for all types) prices    /// of `types` in `region`, read at once. Types are deduplicated; none: no call.
    pub async fn live(ctx: &Ctx, region: &str, types: &[&str]) -> Result<PriceBook> {
        let types: BTreeSet<String> = types.iter().map(|t| t.to_string()).collect();
        let fetched = jiff::Timestamp::now();
        let mut book = PriceBook {
            source: format!(
                "AWS Price List (On-Demand) and EC2 Spot price history, fetched {}",
                fetched.strftime("%Y-%m-%dT%H:%M:%SZ")
            ),
            ..PriceBook::default()
        };
        book.regions.insert(region.to_string());
        if types.is_empty() {
            return Ok(book);
        }
        if let Some(why) = no_usd_price_list(region) {
            book.problems.push(why);
        }
        let priced: BTreeSet<String> =
            if no_usd_price_list(region).is_some() { BTreeSet::new() } else { types.clone() };
        let spot = spot(ctx, region, &types, fetched);
        let (spot, on_demand) = tokio::join!(spot, on_demand(ctx, region, &priced));
        match on_demand {
            Ok(prices) => {
                for (t, usd) in prices {
                    book.insert_on_demand(region, &t, usd);
                }
            }
            Err(e) => book.problems.push(e.to_string()),
        }
        match spot {
            Ok(rows) => {
                for (zone, t, usd) in rows {
                    book.insert_spot(region, &zone, &t, usd);
                }
            }
            Err(e) => book.problems.push(e.to_string()),
        }
        Ok(book)
    }

    /// A book of given prices (tests, and callers that have prices from elsewhere):
    /// `on_demand` as (region, type, USD/h), `spot` as (region, zone, type, USD/h).
    pub fn from_prices(
        source: impl Into<String>,
        on_demand: &[(&str, &str, Usd)],
        spot: &[(&str, &str, &str, Usd)],
    ) -> PriceBook {
        let mut book = PriceBook::none(source);
        for (region, t, usd) in on_demand {
            book.regions.insert(region.to_string());
            book.insert_on_demand(region, t, *usd);
        }
        for (region, zone, t, usd) in spot {
            book.insert_spot(region, zone, t, *usd);
        }
        book
    }

    fn insert_on_demand(&mut self, region: &str, t: &str, usd: Usd) {
        // Zero and negative prices are not prices (Karpenter skips them too).
        if usd.is_finite() && usd > 0.0 {
            self.on_demand.insert((region.to_string(), t.to_string()), usd);
        }
    }

    fn insert_spot(&mut self, region: &str, zone: &str, t: &str, usd: Usd) {
        if usd.is_finite() && usd > 0.0 {
            self.spot.insert((region.to_string(), zone.to_string(), t.to_string()), usd);
        }
    }

    /// The On-Demand price of one instance per hour; None: unpriced.
    pub fn on_demand_hourly(&self, region: &str, instance_type: &str) -> Option<Usd> {
        self.on_demand.get(&(region.to_string(), instance_type.to_string())).copied()
    }

    /// The Spot price of one instance per hour in `zone`; without a zone, the highest of the
    /// region's zones (an instance may land in any of them; the plan's estimate does not
    /// understate). None: unpriced.
    pub fn spot_hourly(&self, region: &str, zone: Option<&str>, instance_type: &str) -> Option<Usd> {
        match zone {
            Some(z) => self.spot.get(&(region.to_string(), z.to_string(), instance_type.to_string())).copied(),
            None => self
                .spot
                .iter()
                .filter(|((r, _, t), _)| r == region && t == instance_type)
                .map(|(_, usd)| *usd)
                .fold(None, |max, usd| Some(max.map_or(usd, |m: Usd| m.max(usd)))),
        }
    }

    /// Where the prices came from, for people ("AWS Price List …, fetched <time>" or
    /// "embedded snapshot <date> from <source>").
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The reads that failed (an operation refused or throttled): their prices are unpriced.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Whether the book has On-Demand prices for `region` at all (the snapshot has few regions).
    pub fn knows_region(&self, region: &str) -> bool {
        self.regions.contains(region)
    }

    /// The regions the book has On-Demand prices for.
    pub fn regions(&self) -> Vec<&str> {
        self.regions.iter().map(String::as_str).collect()
    }
}

/// Why the On-Demand prices of `region` are not read, when they are not: AWS GovCloud has no
/// Price List endpoint (botocore `endpoints.json` has no `api.pricing` in `aws-us-gov`;
/// Karpenter skips On-Demand price reads there, "pricing APIs aren't available in AWS GovCloud
/// regions"), and the China price list answers in CNY (Karpenter's `onDemandPage` reads
/// `pricePerUnit.CNY` for `cn-` regions), which a USD cost cannot show.
pub fn no_usd_price_list(region: &str) -> Option<String> {
    if region.starts_with("us-gov-") {
        Some(format!(
            "On-Demand prices of {region} not read: the AWS Price List Query API has no endpoint in AWS GovCloud"
        ))
    } else if region.starts_with("cn-") {
        Some(format!(
            "On-Demand prices of {region} not read: the China price list is in CNY, and costs are shown in USD"
        ))
    } else {
        None
    }
}

/// The Linux, shared-tenancy On-Demand hourly prices of `types` in `region`, by type. The
/// filters are Karpenter's `fetchOnDemandPricing` (`pricing.go`) plus the types:
/// `capacitystatus` `Used` leaves out the reservation rows, `marketoption` `OnDemand` the
/// Reserved terms, `preInstalledSw` `NA` the SQL-bundled products. All the types go in one
/// `instanceType` `ANY_OF` filter ("For ANY_OF and NONE_OF filter types, you can provide multiple
/// values as a comma-separated string. For example, t2.micro,t2.small,t2.medium", Price List API
/// Reference `Filter`), split only where the value would pass its 1024 characters: GetProducts
/// has a token bucket of 10 refilled at 5 a second per account and endpoint Region (Billing UG
/// `using-pelong`, Quotas), and a call per type per region overran it when several regions
/// share an endpoint (review capfind M2).
async fn on_demand(
    ctx: &Ctx,
    region: &str,
    types: &BTreeSet<String>,
) -> Result<Vec<(String, Usd)>, crate::aws::AwsError> {
    use aws_sdk_pricing::types::{Filter, FilterType};
    let filter = |kind: FilterType, field: &str, value: &str| {
        Filter::builder().r#type(kind).field(field).value(value).build().ok()
    };
    let mut prices: BTreeMap<String, Usd> = BTreeMap::new();
    for chunk in any_of_values(types) {
        let filters: Vec<Filter> = [
            (FilterType::TermMatch, "serviceCode", "AmazonEC2"),
            (FilterType::TermMatch, "regionCode", region),
            (FilterType::AnyOf, "instanceType", chunk.as_str()),
            (FilterType::TermMatch, "operatingSystem", "Linux"),
            (FilterType::TermMatch, "tenancy", "Shared"),
            (FilterType::TermMatch, "preInstalledSw", "NA"),
            (FilterType::TermMatch, "capacitystatus", "Used"),
            (FilterType::TermMatch, "marketoption", "OnDemand"),
        ]
        .into_iter()
        .filter_map(|(k, f, v)| filter(k, f, v))
        .collect();
        let pages = ctx
            .pricing
            .get_products()
            .service_code("AmazonEC2")
            .format_version("aws_v1")
            .set_filters(Some(filters))
            .max_results(100)
            .into_paginator()
            .send();
        let items = ctx.all_pages(Service::Pricing, "GetProducts", pages, |p| p.price_list.unwrap_or_default()).await?;
        for doc in &items {
            for t in types {
                if let Some(usd) = hourly_usd(doc, t) {
                    let e = prices.entry(t.clone()).or_insert(usd);
                    *e = e.min(usd);
                }
            }
        }
    }
    Ok(prices.into_iter().collect())
}

/// `types` as comma-separated `ANY_OF` values of at most 1024 characters each (botocore
/// `pricing` `Value`: max 1024).
fn any_of_values(types: &BTreeSet<String>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for t in types {
        match out.last_mut() {
            Some(last) if last.len() + 1 + t.len() <= 1024 => {
                last.push(',');
                last.push_str(t);
            }
            _ => out.push(t.clone()),
        }
    }
    out
}

/// The USD hourly On-Demand price in one `PriceList` item (a JSON document in a string), if it
/// is `instance_type`'s: `terms.OnDemand.<sku.term>.priceDimensions.<rate>.pricePerUnit.USD`
/// with unit `Hrs`, a decimal string. Items of other types, other units and zero prices are
/// not prices.
pub fn hourly_usd(doc: &str, instance_type: &str) -> Option<Usd> {
    let v: serde_json::Value = serde_json::from_str(doc).ok()?;
    let attrs = &v["product"]["attributes"];
    if attrs["instanceType"].as_str() != Some(instance_type) {
        return None;
    }
    let terms = v["terms"]["OnDemand"].as_object()?;
    terms
        .values()
        .filter_map(|term| term["priceDimensions"].as_object())
        .flat_map(|dims| dims.values())
        .filter(|d| d["unit"].as_str().is_none_or(|u| u == "Hrs"))
        .filter_map(|d| d["pricePerUnit"]["USD"].as_str()?.parse::<Usd>().ok())
        .filter(|usd| *usd > 0.0)
        .reduce(Usd::min)
}

/// The Linux Spot price in effect now of each of `types` in each zone of `region`:
/// `DescribeSpotPriceHistory` with `StartTime` now (each type and zone's last change before it
/// is returned) and the Linux product descriptions, every page; the newest row per zone and type.
async fn spot(
    ctx: &Ctx,
    _region: &str,
    types: &BTreeSet<String>,
    now: jiff::Timestamp,
) -> Result<Vec<(String, String, Usd)>, crate::aws::AwsError> {
    use aws_sdk_ec2::types::InstanceType;
    let pages = ctx
        .ec2
        .describe_spot_price_history()
        .set_instance_types(Some(types.iter().map(|t| InstanceType::from(t.as_str())).collect()))
        .set_product_descriptions(Some(LINUX.iter().map(|d| d.to_string()).collect()))
        .start_time(aws_smithy_types::DateTime::from_secs(now.as_second()))
        .into_paginator()
        .send();
    let rows = ctx
        .all_pages(Service::Ec2, "DescribeSpotPriceHistory", pages, |p| p.spot_price_history.unwrap_or_default())
        .await?;
    let mut newest: BTreeMap<(String, String), (i64, Usd)> = BTreeMap::new();
    for r in rows {
        let (Some(zone), Some(t), Some(price)) = (r.availability_zone(), r.instance_type(), r.spot_price()) else {
            continue;
        };
        let Ok(usd) = price.parse::<Usd>() else { continue };
        let at = r.timestamp().map_or(0, |t| t.secs());
        let key = (zone.to_string(), t.as_str().to_string());
        if newest.get(&key).is_none_or(|(seen, _)| at >= *seen) {
            newest.insert(key, (at, usd));
        }
    }
    Ok(newest.into_iter().map(|((zone, t), (_, usd))| (zone, t, usd)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review capfind M2: the types go into one `ANY_OF` value, split only past 1024 characters.
    #[test]
    fn types_share_any_of_values_of_at_most_1024_characters() {
        let few: BTreeSet<String> = ["p5.48xlarge", "g6.xlarge"].iter().map(|t| t.to_string()).collect();
        assert_eq!(any_of_values(&few), ["g6.xlarge,p5.48xlarge"]);
        let many: BTreeSet<String> = (0..200).map(|i| format!("type{i:03}.48xlarge")).collect();
        let values = any_of_values(&many);
        assert!(values.len() > 1 && values.iter().all(|v| v.len() <= 1024));
        assert_eq!(values.join(",").split(',').count(), 200);
    }

    #[test]
    fn the_embedded_snapshot_is_readable_dated_and_prices_what_the_examples_use() {
        let s: Snapshot = serde_json::from_str(SNAPSHOT).expect("snapshot.json parses");
        assert!(jiff::civil::Date::strptime("%Y-%m-%d", &s.date).is_ok(), "date {}", s.date);
        let book = PriceBook::embedded();
        assert!(book.source().starts_with(&format!("embedded snapshot {} from ", s.date)));
        // us-east-1 list prices of 2026-07-20 (Karpenter's generated table).
        assert_eq!(book.on_demand_hourly("us-east-1", "p5.48xlarge"), Some(55.04));
        assert_eq!(book.on_demand_hourly("us-east-1", "g6.xlarge"), Some(0.8048));
        assert_eq!(book.on_demand_hourly("us-east-1", "no.such"), None);
        assert_eq!(book.on_demand_hourly("us-west-2", "p5.48xlarge"), None, "not in the snapshot: unpriced");
        assert!(book.knows_region("us-east-1") && !book.knows_region("us-west-2"));
        assert!(s.on_demand.values().flat_map(|t| t.values()).all(|usd| *usd > 0.0), "no zero price");
    }

    #[test]
    fn offline_a_region_the_snapshot_lacks_uses_us_east_1_list_prices_and_says_so() {
        let book = PriceBook::embedded_for("us-west-2");
        assert_eq!(book.on_demand_hourly("us-west-2", "g6.xlarge"), Some(0.8048));
        assert_eq!(book.list_region("us-west-2"), "us-east-1");
        assert!(book.source().contains("us-east-1 On-Demand list prices used for us-west-2"), "{}", book.source());
        // The snapshot's own region is its own.
        let east = PriceBook::embedded_for("us-east-1");
        assert_eq!(east.list_region("us-east-1"), "us-east-1");
        assert_eq!(east.source(), PriceBook::embedded().source());
        assert_eq!(east.on_demand_hourly("us-west-2", "g6.xlarge"), None);
    }

    #[test]
    fn a_price_list_item_is_read_at_its_on_demand_hourly_usd_path() {
        let doc = r#"{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":"g6.xlarge","regionCode":"us-west-2"},"sku":"ABC"},
          "serviceCode":"AmazonEC2",
          "terms":{"OnDemand":{"ABC.JRTCKXETXF":{"priceDimensions":{"ABC.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":"0.8048000000"}}},"sku":"ABC","offerTermCode":"JRTCKXETXF"}}}}"#;
        assert_eq!(hourly_usd(doc, "g6.xlarge"), Some(0.8048));
        assert_eq!(hourly_usd(doc, "g6.2xlarge"), None, "another type's item");
        let zero = doc.replace("0.8048000000", "0.0000000000");
        assert_eq!(hourly_usd(&zero, "g6.xlarge"), None, "a zero price is no price");
        assert_eq!(hourly_usd("not json", "g6.xlarge"), None);
    }

    #[test]
    fn spot_without_a_zone_is_the_highest_zone_price() {
        let mut b = PriceBook::none("test");
        b.insert_spot("us-west-2", "us-west-2a", "g6.xlarge", 0.30);
        b.insert_spot("us-west-2", "us-west-2b", "g6.xlarge", 0.35);
        b.insert_spot("us-west-2", "us-west-2c", "g6.xlarge", 0.0);
        assert_eq!(b.spot_hourly("us-west-2", None, "g6.xlarge"), Some(0.35));
        assert_eq!(b.spot_hourly("us-west-2", Some("us-west-2a"), "g6.xlarge"), Some(0.30));
        assert_eq!(b.spot_hourly("us-west-2", Some("us-west-2c"), "g6.xlarge"), None);
        assert_eq!(b.spot_hourly("us-east-1", None, "g6.xlarge"), None);
    }

    #[test]
    fn govcloud_and_china_on_demand_prices_are_not_read_and_say_why() {
        assert!(no_usd_price_list("us-gov-west-1").is_some_and(|w| w.contains("no endpoint in AWS GovCloud")));
        assert!(no_usd_price_list("cn-north-1").is_some_and(|w| w.contains("CNY")));
        assert_eq!(no_usd_price_list("us-west-2"), None);
    }

    #[test]
    fn the_pricing_endpoint_is_the_nearest_of_the_partitions_three() {
        assert_eq!(endpoint_region("us-west-2"), "us-east-1");
        assert_eq!(endpoint_region("eu-west-1"), "eu-central-1");
        assert_eq!(endpoint_region("ap-northeast-1"), "ap-south-1");
        assert_eq!(endpoint_region("cn-north-1"), "cn-northwest-1");
        assert_eq!(endpoint_region("sa-east-1"), "us-east-1");
    }
}
