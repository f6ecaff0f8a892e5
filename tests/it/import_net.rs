//! `[import]` of the network and IAM kinds (issue 20), kind by kind: brownfield objects made
//! with the AWS SDK directly (never through gpustack), read by each kind's `Kind::import`,
//! compared the way the plan compares an import (`current(recorded = {}, observed)`, settled,
//! against the file's inputs with defaults), tagged by `tag_imported`, and read back by the
//! kind's refresh (`read_all`) as the stack's own.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    AttributeBooleanValue, DomainType, Filter, IpPermission, IpRange, ResourceType, Tag, TagSpecification,
    UserIdGroupPair,
};
use gpustack::aws::Ctx;
use gpustack::resources::{Imported, Kind, kind};
use gpustack::value::{Attrs, Value};

use crate::harness::{Emulator, Env, REGION, block_on};

const STACK: &str = "brown";

fn ctx(emu: &Emulator) -> Ctx {
    block_on(async {
        let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(REGION))
            .endpoint_url(&emu.url)
            .credentials_provider(aws_sdk_ec2::config::Credentials::new("test", "test", None, None, "test"))
            .load()
            .await;
        Ctx::from_conf(STACK, &conf)
    })
}

fn named(rt: ResourceType, name: &str) -> TagSpecification {
    TagSpecification::builder().resource_type(rt).tags(Tag::builder().key("Name").value(name).build()).build()
}

/// The inputs a stack file gives `address` (literal ids only): its attributes, the kind's
/// defaults, normalized — what the plan diffs an import against.
fn file_inputs(body: &str, address: &str) -> Attrs {
    let text = format!("[stack]\nname = \"{STACK}\"\nregion = \"{REGION}\"\n\n{body}");
    let vars = gpustack::stack::VarSources { cli: &[], env: &|_| None };
    let stack = gpustack::load::from_bytes(std::path::Path::new("import.toml"), text.into_bytes(), &vars)
        .unwrap_or_else(|d| panic!("the file is valid: {d:?}"));
    let r = stack.get(address).unwrap_or_else(|| panic!("{address} in the file"));
    let mut inputs: Attrs = r.attrs.iter().map(|(k, e)| (k.clone(), e.resolve(&|_| Value::Unknown))).collect();
    for a in r.kind.attrs().iter().filter(|a| !a.computed) {
        if let (false, Some(v)) = (inputs.contains_key(a.name), a.default.value()) {
            inputs.insert(a.name.to_string(), v);
        }
    }
    gpustack::resources::of(r).normalize(&mut inputs);
    inputs
}

/// The attributes an import of `kind` would update for a file saying `desired`.
fn changed(kind: &dyn Kind, imported: &Imported, desired: &Attrs) -> Vec<String> {
    let mut current = kind.current(&Attrs::new(), &imported.observed.attrs);
    kind.settle(&mut current, desired);
    kind.attrs().iter().filter(|a| current.get(a.name) != desired.get(a.name)).map(|a| a.name.to_string()).collect()
}

fn import(ctx: &Ctx, k: &str, id: &str) -> Imported {
    block_on(kind(k).unwrap().import(ctx, id)).unwrap_or_else(|e| panic!("import {k} {id}: {e}")).expect("found")
}

/// What the kind's refresh reads for `address` once the import is tagged.
fn refreshed(ctx: &Ctx, k: &str, address: &str) -> gpustack::resources::Observed {
    let all = block_on(kind(k).unwrap().read_all(ctx)).unwrap();
    all.into_iter().find(|o| o.address.as_deref() == Some(address)).unwrap_or_else(|| panic!("refresh finds {address}"))
}

struct Brownfield {
    vpc: String,
    igw: String,
    public_rt: String,
    public: Vec<String>,
    nat: String,
    eip: String,
    /// Each with a route table of its own through the NAT.
    private: Vec<(String, String)>,
    /// Two subnets on one private route table through the NAT.
    shared: (Vec<String>, String),
}

/// eksctl's layout (`eksctl.io/usage/vpc-networking`): DNS on, an internet gateway and one
/// public route table for the public subnets (MapPublicIpOnLaunch), one NAT gateway with an
/// Elastic IP in a public subnet, a private route table per private subnet — plus two
/// subnets sharing one private table, as terraform-aws-modules/vpc's `single_nat_gateway`
/// makes them.
fn brownfield(emu: &Emulator) -> Brownfield {
    brownfield_with(emu, true)
}

/// [`brownfield`], with or without the two subnets on a shared table.
fn brownfield_with(emu: &Emulator, with_shared: bool) -> Brownfield {
    let ec2 = emu.ec2();
    block_on(async {
        let vpc = ec2
            .create_vpc()
            .cidr_block("192.168.0.0/16")
            .tag_specifications(named(ResourceType::Vpc, "eksctl-vpc"))
            .send()
            .await
            .unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let on = || AttributeBooleanValue::builder().value(true).build();
        ec2.modify_vpc_attribute().vpc_id(&vpc).enable_dns_support(on()).send().await.unwrap();
        ec2.modify_vpc_attribute().vpc_id(&vpc).enable_dns_hostnames(on()).send().await.unwrap();
        let igw = ec2.create_internet_gateway().send().await.unwrap();
        let igw = igw.internet_gateway().unwrap().internet_gateway_id().unwrap().to_string();
        ec2.attach_internet_gateway().internet_gateway_id(&igw).vpc_id(&vpc).send().await.unwrap();
        let table = |name: &'static str| {
            let ec2 = ec2.clone();
            let vpc = vpc.clone();
            async move {
                let rt = ec2
                    .create_route_table()
                    .vpc_id(&vpc)
                    .tag_specifications(named(ResourceType::RouteTable, name))
                    .send()
                    .await
                    .unwrap();
                rt.route_table().unwrap().route_table_id().unwrap().to_string()
            }
        };
        let public_rt = table("public").await;
        let route = ec2.create_route().route_table_id(&public_rt).destination_cidr_block("0.0.0.0/0");
        route.gateway_id(&igw).send().await.unwrap();
        let subnet = |cidr: &'static str, zone: &'static str| {
            let ec2 = ec2.clone();
            let vpc = vpc.clone();
            async move {
                let s = ec2
                    .create_subnet()
                    .vpc_id(&vpc)
                    .cidr_block(cidr)
                    .availability_zone(zone)
                    .tag_specifications(named(ResourceType::Subnet, cidr))
                    .send()
                    .await
                    .unwrap();
                s.subnet().unwrap().subnet_id().unwrap().to_string()
            }
        };
        let mut public = vec![];
        for (cidr, zone) in [("192.168.0.0/19", "us-west-2a"), ("192.168.32.0/19", "us-west-2b")] {
            let s = subnet(cidr, zone).await;
            ec2.modify_subnet_attribute().subnet_id(&s).map_public_ip_on_launch(on()).send().await.unwrap();
            ec2.associate_route_table().route_table_id(&public_rt).subnet_id(&s).send().await.unwrap();
            public.push(s);
        }
        let eip = ec2.allocate_address().domain(DomainType::Vpc).send().await.unwrap();
        let eip = eip.allocation_id().unwrap().to_string();
        let nat = ec2
            .create_nat_gateway()
            .subnet_id(&public[0])
            .allocation_id(&eip)
            .tag_specifications(named(ResourceType::Natgateway, "eksctl-nat"))
            .send()
            .await
            .unwrap();
        let nat = nat.nat_gateway().unwrap().nat_gateway_id().unwrap().to_string();
        let mut private = vec![];
        for (cidr, zone, name) in
            [("192.168.64.0/19", "us-west-2a", "private-a"), ("192.168.96.0/19", "us-west-2b", "private-b")]
        {
            let s = subnet(cidr, zone).await;
            let rt = table(name).await;
            let route = ec2.create_route().route_table_id(&rt).destination_cidr_block("0.0.0.0/0");
            route.nat_gateway_id(&nat).send().await.unwrap();
            ec2.associate_route_table().route_table_id(&rt).subnet_id(&s).send().await.unwrap();
            private.push((s, rt));
        }
        if !with_shared {
            return Brownfield { vpc, igw, public_rt, public, nat, eip, private, shared: (vec![], String::new()) };
        }
        let shared_rt = table("private-shared").await;
        let route = ec2.create_route().route_table_id(&shared_rt).destination_cidr_block("0.0.0.0/0");
        route.nat_gateway_id(&nat).send().await.unwrap();
        let mut shared = vec![];
        for (cidr, zone) in [("192.168.128.0/19", "us-west-2a"), ("192.168.160.0/19", "us-west-2b")] {
            let s = subnet(cidr, zone).await;
            ec2.associate_route_table().route_table_id(&shared_rt).subnet_id(&s).send().await.unwrap();
            shared.push(s);
        }
        Brownfield { vpc, igw, public_rt, public, nat, eip, private, shared: (shared, shared_rt) }
    })
}

fn tags_of(ec2: &aws_sdk_ec2::Client, id: &str) -> BTreeMap<String, String> {
    block_on(async {
        let out = ec2.describe_tags().filters(Filter::builder().name("resource-id").values(id).build()).send().await;
        out.unwrap()
            .tags()
            .iter()
            .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()))
            .collect()
    })
}

#[test]
fn an_eksctl_network_imports_with_no_update_for_a_file_that_says_the_same() {
    let emu = Emulator::start();
    let b = brownfield(&emu);
    let ctx = ctx(&emu);
    let ec2 = emu.ec2();

    // The VPC: DNS on, its gateway routed from the public table.
    let vpc = import(&ctx, "vpc", &b.vpc);
    let same =
        "[vpc.main]\ncidr_block = \"192.168.0.0/16\"\ninternet_gateway = true\ntags = { Name = \"eksctl-vpc\" }\n"
            .to_string();
    assert_eq!(changed(kind("vpc").unwrap(), &vpc, &file_inputs(&same, "vpc.main")), Vec::<String>::new());
    let other = same.replace("eksctl-vpc", "renamed");
    assert_eq!(changed(kind("vpc").unwrap(), &vpc, &file_inputs(&other, "vpc.main")), ["tags"]);
    assert_eq!(vpc.observed.outputs["id"], Value::str(&b.vpc));

    // A public subnet, a private one on its own NAT table, one on the shared table.
    let subnet_file = |cidr: &str, zone: &str, extra: &str| {
        format!(
            "[subnet.s]\nvpc = \"{}\"\ncidr_block = \"{cidr}\"\navailability_zone = \"{zone}\"\ntags = {{ Name = \"{cidr}\" }}\n{extra}",
            b.vpc
        )
    };
    let public = import(&ctx, "subnet", &b.public[0]);
    let file = subnet_file("192.168.0.0/19", "us-west-2a", "public = true\n");
    assert_eq!(changed(kind("subnet").unwrap(), &public, &file_inputs(&file, "subnet.s")), Vec::<String>::new());
    assert!(public.unexpressed.is_empty(), "{:?}", public.unexpressed);

    let (own, own_rt) = &b.private[0];
    let private = import(&ctx, "subnet", own);
    let nat_line = format!("nat_gateway = \"{}\"\n", b.nat);
    let file = subnet_file("192.168.64.0/19", "us-west-2a", &nat_line);
    assert_eq!(changed(kind("subnet").unwrap(), &private, &file_inputs(&file, "subnet.s")), Vec::<String>::new());
    let without_nat = subnet_file("192.168.64.0/19", "us-west-2a", "");
    assert_eq!(changed(kind("subnet").unwrap(), &private, &file_inputs(&without_nat, "subnet.s")), ["nat_gateway"]);
    assert_eq!(private.observed.outputs["vpc_id"], Value::str(&b.vpc));

    let shared = import(&ctx, "subnet", &b.shared.0[0]);
    let file = subnet_file("192.168.128.0/19", "us-west-2a", "");
    assert_eq!(changed(kind("subnet").unwrap(), &shared, &file_inputs(&file, "subnet.s")), Vec::<String>::new());
    let note = shared.unexpressed.iter().find(|(f, _)| f == "route_table").expect("the shared table is reported");
    assert!(note.1.contains(&b.shared.1) && note.1.contains(&b.shared.0[1]) && note.1.contains(&b.nat), "{note:?}");

    // The NAT gateway: its subnet, and the address create would record.
    let nat = import(&ctx, "nat_gateway", &b.nat);
    let file = format!("[nat_gateway.n]\nsubnet = \"{}\"\ntags = {{ Name = \"eksctl-nat\" }}\n", b.public[0]);
    assert_eq!(changed(kind("nat_gateway").unwrap(), &nat, &file_inputs(&file, "nat_gateway.n")), Vec::<String>::new());
    assert!(nat.observed.outputs["public_ip"].as_str().is_some_and(|ip| !ip.is_empty()));

    // Nothing was changed by reading: no gpustack tag anywhere yet.
    for id in [&b.vpc, &b.igw, &b.public_rt, own, own_rt, &b.nat] {
        assert!(!tags_of(&ec2, id).contains_key("gpustack:stack"), "{id} was tagged by a read");
    }

    // Applying the imports tags the objects and the parts gpustack manages with them …
    block_on(kind("vpc").unwrap().tag_imported(&ctx, "vpc.main", &b.vpc, &vpc.observed.outputs)).unwrap();
    block_on(kind("subnet").unwrap().tag_imported(&ctx, "subnet.own", own, &private.observed.outputs)).unwrap();
    let shared_id = &b.shared.0[0];
    block_on(kind("subnet").unwrap().tag_imported(&ctx, "subnet.shared", shared_id, &shared.observed.outputs)).unwrap();
    block_on(kind("nat_gateway").unwrap().tag_imported(&ctx, "nat_gateway.n", &b.nat, &nat.observed.outputs)).unwrap();
    assert_eq!(tags_of(&ec2, &b.public_rt).get("gpustack:public-routes").map(String::as_str), Some("true"));
    assert_eq!(tags_of(&ec2, &b.igw).get("gpustack:address").map(String::as_str), Some("vpc.main"));
    assert_eq!(tags_of(&ec2, own_rt).get("gpustack:routes-for"), Some(own));
    // The NAT's Elastic IP is never tagged into the stack (review imp-net M3), and the note says it stays.
    assert!(!tags_of(&ec2, &b.eip).contains_key("gpustack:stack"), "the Elastic IP is not the stack's");
    assert!(nat.unexpressed.iter().any(|(f, v)| f == "elastic_ip" && v.contains(&b.eip)), "{:?}", nat.unexpressed);
    // … but never a table the subnet shares.
    assert!(tags_of(&ec2, &b.shared.1).is_empty() || !tags_of(&ec2, &b.shared.1).contains_key("gpustack:stack"));

    // … and refresh then reads them as the stack's own, saying what the import said.
    let vpc_now = refreshed(&ctx, "vpc", "vpc.main");
    assert_eq!(vpc_now.attrs["internet_gateway"], Value::Bool(true));
    let subnet_now = refreshed(&ctx, "subnet", "subnet.own");
    assert_eq!(subnet_now.attrs.get("nat_gateway"), Some(&Value::str(&b.nat)));
    let shared_now = refreshed(&ctx, "subnet", "subnet.shared");
    assert_eq!(shared_now.attrs.get("nat_gateway"), None);
    refreshed(&ctx, "nat_gateway", "nat_gateway.n");
}

#[test]
fn an_imported_subnet_keeps_the_tables_gpustack_does_not_own() {
    let emu = Emulator::start();
    let b = brownfield(&emu);
    let ctx = ctx(&emu);
    let ec2 = emu.ec2();
    let subnet = kind("subnet").unwrap();
    let (shared, rt) = (&b.shared.0[0], &b.shared.1);
    let imported = import(&ctx, "subnet", shared);
    block_on(subnet.tag_imported(&ctx, "subnet.shared", shared, &imported.observed.outputs)).unwrap();
    // Routing a subnet of a shared table through a NAT would move it off that table: refused.
    let old = imported.observed.attrs.clone();
    let mut new = old.clone();
    new.insert("nat_gateway".into(), Value::str(&b.nat));
    let err = block_on(subnet.update(&ctx, "subnet.shared", shared, &old, &new, &["nat_gateway".into()])).unwrap_err();
    assert!(err.to_string().contains(rt) && err.to_string().contains("did not make"), "{err}");

    // Deleting the subnet that had a table of its own deletes that table; the shared one stays.
    let (own, own_rt) = &b.private[0];
    let imported = import(&ctx, "subnet", own);
    block_on(subnet.tag_imported(&ctx, "subnet.own", own, &imported.observed.outputs)).unwrap();
    block_on(subnet.delete(&ctx, "subnet.own", own, &imported.observed.attrs, &imported.observed.outputs)).unwrap();
    let tables = block_on(async {
        let out = ec2.describe_route_tables().filters(Filter::builder().name("vpc-id").values(&b.vpc).build());
        out.send()
            .await
            .unwrap()
            .route_tables()
            .iter()
            .filter_map(|t| t.route_table_id().map(str::to_string))
            .collect::<Vec<_>>()
    });
    assert!(!tables.contains(own_rt), "the subnet's own table went with it");
    assert!(tables.contains(rt) && tables.contains(&b.public_rt), "tables it does not own stay: {tables:?}");
}

#[test]
fn an_imported_security_group_observes_every_rule_and_eks_groups_are_refused() {
    let emu = Emulator::start();
    let ec2 = emu.ec2();
    let ctx = ctx(&emu);
    let (vpc, sg, other) = block_on(async {
        let vpc = ec2.create_vpc().cidr_block("10.9.0.0/16").send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let group = |name: &'static str| {
            let ec2 = ec2.clone();
            let vpc = vpc.clone();
            async move {
                let g = ec2.create_security_group().group_name(name).description("nodes of the cluster").vpc_id(&vpc);
                g.send().await.unwrap().group_id().unwrap().to_string()
            }
        };
        let (sg, other) = (group("nodes").await, group("lb").await);
        let perms = vec![
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(443)
                .to_port(443)
                .ip_ranges(IpRange::builder().cidr_ip("10.9.0.0/16").build())
                .build(),
            IpPermission::builder()
                .ip_protocol("-1")
                .user_id_group_pairs(UserIdGroupPair::builder().group_id(&sg).build())
                .build(),
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(30000)
                .to_port(32767)
                .user_id_group_pairs(UserIdGroupPair::builder().group_id(&other).description("node ports").build())
                .build(),
        ];
        ec2.authorize_security_group_ingress().group_id(&sg).set_ip_permissions(Some(perms)).send().await.unwrap();
        (vpc, sg, other)
    });
    let imported = import(&ctx, "security_group", &sg);
    let file = format!(
        r#"[security_group.nodes]
vpc = "{vpc}"
name = "nodes"
description = "nodes of the cluster"
ingress = [
  {{ protocol = "tcp", from_port = 443, cidr = "10.9.0.0/16" }},
  {{ protocol = "-1", self = true }},
  {{ protocol = "tcp", from_port = 30000, to_port = 32767, security_group = "{other}", description = "node ports" }},
]
egress = [{{ protocol = "-1", cidr = "0.0.0.0/0" }}]
"#
    );
    let sg_kind = kind("security_group").unwrap();
    assert_eq!(changed(sg_kind, &imported, &file_inputs(&file, "security_group.nodes")), Vec::<String>::new());
    let fewer = file.replace("  { protocol = \"-1\", self = true },\n", "");
    assert_eq!(changed(sg_kind, &imported, &file_inputs(&fewer, "security_group.nodes")), ["ingress"]);

    // One rule imported on its own says the same as the group's inline form.
    let rule = block_on(async {
        let out = ec2.describe_security_group_rules().filters(Filter::builder().name("group-id").values(&sg).build());
        let rules = out.send().await.unwrap().security_group_rules().to_vec();
        rules.into_iter().find(|r| r.from_port() == Some(30000)).unwrap().security_group_rule_id().unwrap().to_string()
    });
    let r = import(&ctx, "security_group_rule", &rule);
    let file = format!(
        "[security_group_rule.np]\nsecurity_group = \"{sg}\"\ntype = \"ingress\"\nprotocol = \"tcp\"\nfrom_port = 30000\nto_port = 32767\nsource_security_group = \"{other}\"\ndescription = \"node ports\"\n"
    );
    let rule_kind = kind("security_group_rule").unwrap();
    assert_eq!(changed(rule_kind, &r, &file_inputs(&file, "security_group_rule.np")), Vec::<String>::new());
    let wider = file.replace("to_port = 32767", "to_port = 32768");
    assert_eq!(changed(rule_kind, &r, &file_inputs(&wider, "security_group_rule.np")), ["to_port"]);

    // The group EKS made for a cluster is the cluster's: refused, pointing at the reference.
    let eks_sg = block_on(async {
        let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
        let role =
            emu.iam().create_role().role_name("cluster").assume_role_policy_document(trust).send().await.unwrap();
        let mut subnets = vec![];
        for (cidr, zone) in [("10.9.0.0/20", "us-west-2a"), ("10.9.16.0/20", "us-west-2b")] {
            let s = ec2.create_subnet().vpc_id(&vpc).cidr_block(cidr).availability_zone(zone).send().await.unwrap();
            subnets.push(s.subnet.unwrap().subnet_id.unwrap());
        }
        let vpc_config = aws_sdk_eks::types::VpcConfigRequest::builder().set_subnet_ids(Some(subnets)).build();
        let c =
            emu.eks().create_cluster().name("gpu").role_arn(role.role.unwrap().arn).resources_vpc_config(vpc_config);
        let c = c.send().await.unwrap().cluster.unwrap();
        c.resources_vpc_config.unwrap().cluster_security_group_id.expect("EKS made a cluster security group")
    });
    let err = block_on(sg_kind.import(&ctx, &eks_sg)).unwrap_err();
    assert!(err.to_string().contains("eks_cluster.<name>.security_group_id"), "{err}");
    assert!(block_on(sg_kind.import(&ctx, "sg-0123456789abcdef0")).unwrap().is_none());
}

#[test]
fn an_imported_role_keeps_a_trust_the_language_cannot_say() {
    let emu = Emulator::start();
    let iam = emu.iam();
    let ctx = ctx(&emu);
    let trust = |extra: &str| {
        format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Sid":"EKSNodeAssumeRole","Effect":"Allow","Principal":{{"Service":["ec2.amazonaws.com"]}},"Action":["sts:AssumeRole"]{extra}}}]}}"#
        )
    };
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#;
    block_on(async {
        for (name, doc) in [
            ("node", trust("")),
            ("guarded", trust(r#","Condition":{"StringEquals":{"aws:SourceAccount":"123456789012"}}"#)),
        ] {
            iam.create_role().role_name(name).assume_role_policy_document(doc).send().await.unwrap();
        }
        let arn = "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy";
        iam.attach_role_policy().role_name("node").policy_arn(arn).send().await.unwrap();
        iam.put_role_policy().role_name("node").policy_name("read").policy_document(policy).send().await.unwrap();
        iam.create_instance_profile().instance_profile_name("node").send().await.unwrap();
        iam.add_role_to_instance_profile().instance_profile_name("node").role_name("node").send().await.unwrap();
        iam.create_instance_profile().instance_profile_name("eksctl-node-profile").send().await.unwrap();
        iam.add_role_to_instance_profile()
            .instance_profile_name("eksctl-node-profile")
            .role_name("guarded")
            .send()
            .await
            .unwrap();
    });
    let role = kind("iam_role").unwrap();
    let node = import(&ctx, "iam_role", "node");
    let file = format!(
        "[iam_role.node]\nname = \"node\"\nservice = \"ec2.amazonaws.com\"\nmanaged_policies = [\"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy\"]\ninline_policies = {{ read = '''{policy}''' }}\ninstance_profile = true\n"
    );
    assert_eq!(changed(role, &node, &file_inputs(&file, "iam_role.node")), Vec::<String>::new());
    let no_profile = file.replace("instance_profile = true", "instance_profile = false");
    assert_eq!(changed(role, &node, &file_inputs(&no_profile, "iam_role.node")), ["instance_profile"]);
    assert!(node.unexpressed.iter().all(|(f, _)| f == "path"), "{:?}", node.unexpressed);
    assert_eq!(node.observed.outputs["instance_profile"], Value::str("node"));

    let guarded = import(&ctx, "iam_role", "guarded");
    let fields: Vec<&str> = guarded.unexpressed.iter().map(|(f, _)| f.as_str()).collect();
    assert!(fields.contains(&"assume_role_policy") && fields.contains(&"instance_profile"), "{fields:?}");
    // A trust change on it would drop the condition: refused, and the policy stays.
    let old = guarded.observed.attrs.clone();
    let mut new = old.clone();
    new.insert("service".into(), Value::str("eks.amazonaws.com"));
    let err = block_on(role.update(&ctx, "iam_role.guarded", "guarded", &old, &new, &["service".into()])).unwrap_err();
    assert!(err.to_string().contains("update-assume-role-policy"), "{err}");
    let doc = block_on(iam.get_role().role_name("guarded").send()).unwrap().role.unwrap().assume_role_policy_document;
    assert!(doc.unwrap_or_default().contains("SourceAccount"));

    // Tagged, the role outside gpustack's path is read by refresh from the ids state records.
    block_on(role.tag_imported(&ctx, "iam_role.node", "node", &node.observed.outputs)).unwrap();
    ctx.recorded_ids.write().unwrap().insert("iam_role".into(), ["node".to_string()].into());
    let now = refreshed(&ctx, "iam_role", "iam_role.node");
    assert_eq!(now.attrs.get("service"), Some(&Value::str("ec2.amazonaws.com")));
    let profile = block_on(iam.get_instance_profile().instance_profile_name("node").send()).unwrap();
    let tagged = profile.instance_profile.unwrap().tags.unwrap_or_default();
    assert!(tagged.iter().any(|t| t.key() == "gpustack:address" && t.value() == "iam_role.node"), "{tagged:?}");
}

#[test]
fn an_imported_oidc_provider_leaves_thumbprints_to_iam_and_shows_client_id_changes() {
    let emu = Emulator::start();
    let iam = emu.iam();
    let ctx = ctx(&emu);
    let url = "https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE";
    let arn = block_on(
        iam.create_open_id_connect_provider()
            .url(url)
            .client_id_list("sts.amazonaws.com")
            .thumbprint_list("9e99a48a9960b14926bb7f3b02e22da2b0ab7280")
            .send(),
    )
    .unwrap()
    .open_id_connect_provider_arn
    .unwrap();
    let provider = kind("oidc_provider").unwrap();
    let imported = import(&ctx, "oidc_provider", &arn);
    let file = format!("[oidc_provider.irsa]\nurl = \"{url}\"\n");
    assert_eq!(changed(provider, &imported, &file_inputs(&file, "oidc_provider.irsa")), Vec::<String>::new());
    let more = format!("{file}client_ids = [\"sts.amazonaws.com\", \"other\"]\n");
    assert_eq!(changed(provider, &imported, &file_inputs(&more, "oidc_provider.irsa")), ["client_ids"]);
    assert_eq!(imported.observed.outputs["arn"], Value::str(&arn));
}

#[test]
fn an_imported_interface_endpoint_says_its_subnets_and_groups() {
    let emu = Emulator::start();
    let ec2 = emu.ec2();
    let ctx = ctx(&emu);
    let (vpc, subnet, sg, id) = block_on(async {
        let vpc = ec2.create_vpc().cidr_block("10.7.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
        let on = || AttributeBooleanValue::builder().value(true).build();
        ec2.modify_vpc_attribute().vpc_id(&vpc).enable_dns_support(on()).send().await.unwrap();
        ec2.modify_vpc_attribute().vpc_id(&vpc).enable_dns_hostnames(on()).send().await.unwrap();
        let s = ec2.create_subnet().vpc_id(&vpc).cidr_block("10.7.0.0/20").availability_zone("us-west-2a");
        let subnet = s.send().await.unwrap().subnet.unwrap().subnet_id.unwrap();
        let g = ec2.create_security_group().group_name("endpoints").description("443 from the VPC").vpc_id(&vpc);
        let sg = g.send().await.unwrap().group_id.unwrap();
        let e = ec2
            .create_vpc_endpoint()
            .vpc_id(&vpc)
            .service_name(format!("com.amazonaws.{REGION}.ecr.api"))
            .vpc_endpoint_type(aws_sdk_ec2::types::VpcEndpointType::Interface)
            .subnet_ids(&subnet)
            .security_group_ids(&sg)
            .private_dns_enabled(true);
        let id = e.send().await.unwrap().vpc_endpoint.unwrap().vpc_endpoint_id.unwrap();
        (vpc, subnet, sg, id)
    });
    let imported = import(&ctx, "vpc_endpoint", &id);
    let file = format!(
        "[vpc_endpoint.ecr]\nvpc = \"{vpc}\"\nservice = \"ecr.api\"\nsubnets = [\"{subnet}\"]\nsecurity_groups = [\"{sg}\"]\n"
    );
    let endpoint = kind("vpc_endpoint").unwrap();
    assert_eq!(changed(endpoint, &imported, &file_inputs(&file, "vpc_endpoint.ecr")), Vec::<String>::new());
    let none = file.replace(&format!("[\"{sg}\"]"), "[]");
    assert_eq!(changed(endpoint, &imported, &file_inputs(&none, "vpc_endpoint.ecr")), ["security_groups"]);
}

/// The round trip through the binary: an eksctl network and node role made with the SDK, a
/// stack file that says the same with `[import]` entries, a plan that reads only and changes
/// nothing, an apply that only tags, a clean plan after it (refresh finds everything by its
/// tags, the role outside gpustack's path by the id state records), and a destroy that
/// removes exactly what was imported, the VPC last.
#[test]
fn an_imported_eksctl_network_round_trips_through_plan_apply_and_destroy() {
    let env = Env::new();
    let b = brownfield_with(&env.emu, false);
    write_eksctl_file(&env, &b);
    let iam = env.emu.iam();
    round_trip(&env, &b);
    let role = block_on(iam.get_role().role_name("eksctl-node").send());
    assert!(role.is_err(), "the imported role is deleted");
}

/// Review imp-net M2: the VPC also holds two subnets and a shared route table the stack did
/// not import. Destroy deletes what was imported, then refuses the VPC before touching its
/// internet gateway or public table, naming what blocks DeleteVpc.
#[test]
fn destroying_an_imported_vpc_that_holds_foreign_parts_refuses_before_touching_its_gateway() {
    let env = Env::new();
    let b = brownfield_with(&env.emu, true);
    write_eksctl_file(&env, &b);
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let out = env.run(&["destroy", "s.toml", "--auto-approve"]);
    assert_ne!(out.code, 0, "{out:?}");
    let text = format!("{}{}", out.stdout, out.stderr);
    for id in [&b.shared.1, &b.shared.0[0], &b.shared.0[1]] {
        assert!(text.contains(id.as_str()), "names {id}: {text}");
    }
    let ec2 = env.emu.ec2();
    let (vpc, igw, rt) = (b.vpc.clone(), b.igw.clone(), b.public_rt.clone());
    block_on(async move {
        let f = |n: &str, v: &str| Filter::builder().name(n).values(v).build();
        let vpcs = ec2.describe_vpcs().filters(f("vpc-id", &vpc)).send().await.unwrap();
        assert_eq!(vpcs.vpcs().len(), 1, "the VPC stays");
        let igws = ec2.describe_internet_gateways().filters(f("attachment.vpc-id", &vpc)).send().await.unwrap();
        assert_eq!(igws.internet_gateways().first().and_then(|g| g.internet_gateway_id()), Some(igw.as_str()));
        let tables = ec2.describe_route_tables().filters(f("route-table-id", &rt)).send().await.unwrap();
        assert_eq!(tables.route_tables().len(), 1, "the public table stays");
    });
}

/// The stack file the round trips import [`brownfield`] with: the VPC, its four eksctl subnets,
/// the NAT gateway and a node role (made here) with its instance profile.
fn write_eksctl_file(env: &Env, b: &Brownfield) {
    let iam = env.emu.iam();
    block_on(async {
        let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
        iam.create_role().role_name("eksctl-node").assume_role_policy_document(trust).send().await.unwrap();
        let arn = "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy";
        iam.attach_role_policy().role_name("eksctl-node").policy_arn(arn).send().await.unwrap();
        iam.create_instance_profile().instance_profile_name("eksctl-node").send().await.unwrap();
        let add = iam.add_role_to_instance_profile().instance_profile_name("eksctl-node").role_name("eksctl-node");
        add.send().await.unwrap();
    });
    let subnet = |name: &str, id: &str, cidr: &str, zone: &str, extra: &str| {
        format!(
            "[subnet.{name}]\nvpc = \"${{vpc.main.id}}\"\ncidr_block = \"{cidr}\"\navailability_zone = \"{zone}\"\ntags = {{ Name = \"{cidr}\" }}\n{extra}\n",
        ) + &format!("# {id}\n")
    };
    let mut file = r#"[stack]
name   = "brown"
region = "us-west-2"

[vpc.main]
cidr_block       = "192.168.0.0/16"
internet_gateway = true
tags             = { Name = "eksctl-vpc" }

[nat_gateway.main]
subnet = "${subnet.public_a.id}"
tags   = { Name = "eksctl-nat" }

[iam_role.node]
name             = "eksctl-node"
service          = "ec2.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"]
instance_profile = true

"#
    .to_string();
    file += &subnet("public_a", &b.public[0], "192.168.0.0/19", "us-west-2a", "public = true");
    file += &subnet("public_b", &b.public[1], "192.168.32.0/19", "us-west-2b", "public = true");
    file += &subnet(
        "private_a",
        &b.private[0].0,
        "192.168.64.0/19",
        "us-west-2a",
        "nat_gateway = \"${nat_gateway.main.id}\"",
    );
    file += &subnet(
        "private_b",
        &b.private[1].0,
        "192.168.96.0/19",
        "us-west-2b",
        "nat_gateway = \"${nat_gateway.main.id}\"",
    );
    file += &format!(
        "[import]\n\"vpc.main\" = \"{}\"\n\"subnet.public_a\" = \"{}\"\n\"subnet.public_b\" = \"{}\"\n\"subnet.private_a\" = \"{}\"\n\"subnet.private_b\" = \"{}\"\n\"nat_gateway.main\" = \"{}\"\n\"iam_role.node\" = \"eksctl-node\"\n",
        b.vpc, b.public[0], b.public[1], b.private[0].0, b.private[1].0, b.nat
    );
    env.write("s.toml", &file);
}

/// Plan (clean, changes nothing), apply (tags only), plan again (clean), destroy (the VPC is gone).
fn round_trip(env: &Env, b: &Brownfield) {
    env.emu.reset_requests();
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "a clean import is no change:\n{plan:?}");
    assert!(plan.stdout.contains("7 to import"), "{plan:?}");
    let during_plan = crate::import::mutating(&env.emu.requests());
    assert!(during_plan.is_empty(), "plan changed something: {during_plan:?}");

    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let mut calls = crate::import::mutating(&env.emu.requests());
    calls.sort();
    calls.dedup();
    assert_eq!(calls, ["CreateTags", "TagInstanceProfile", "TagRole"], "an import applies only tags");

    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "after the apply the stack owns them as they are:\n{again:?}");
    assert!(again.stdout.contains("No changes."), "{again:?}");

    env.ok(&["destroy", "s.toml", "--auto-approve"]);
    let ec2 = env.emu.ec2();
    let vpc = b.vpc.clone();
    let left = block_on(async move {
        let out = ec2.describe_vpcs().filters(Filter::builder().name("vpc-id").values(vpc).build()).send().await;
        out.unwrap().vpcs().len()
    });
    assert_eq!(left, 0, "the imported VPC is gone, with its gateway, tables, subnets and NAT");
    // … but not the NAT's Elastic IP, which was never gpustack's (review imp-net M3).
    let ec2 = env.emu.ec2();
    let eip = b.eip.clone();
    let kept =
        block_on(async move { ec2.describe_addresses().allocation_ids(eip).send().await.unwrap().addresses().len() });
    assert_eq!(kept, 1, "the imported NAT's Elastic IP is disassociated, not released");
}

/// Review imp-net M5: a VPC made by plain CreateVpc has DNS hostnames off (EC2 API reference
/// `CreateVpc`; moto `vpcs.py`). The import reads `dns = false`; a file that says so (as
/// `import generate` writes it) plans nothing, and a file that leaves `dns` out plans the
/// update to turn DNS on — never a silent one.
#[test]
fn a_vpc_with_dns_hostnames_off_imports_as_dns_false() {
    let env = Env::new();
    let ec2 = env.emu.ec2();
    let vpc = block_on(async {
        let out = ec2.create_vpc().cidr_block("10.9.0.0/16").send().await.unwrap();
        out.vpc().unwrap().vpc_id().unwrap().to_string()
    });
    let ctx = ctx(&env.emu);
    let imported = import(&ctx, "vpc", &vpc);
    assert_eq!(imported.observed.attrs.get("dns"), Some(&Value::Bool(false)), "{:?}", imported.observed.attrs);
    let k = kind("vpc").unwrap();
    let said = file_inputs("[vpc.main]\ncidr_block = \"10.9.0.0/16\"\ndns = false\n", "vpc.main");
    assert_eq!(changed(k, &imported, &said), Vec::<String>::new());
    let left_out = file_inputs("[vpc.main]\ncidr_block = \"10.9.0.0/16\"\n", "vpc.main");
    assert_eq!(changed(k, &imported, &left_out), ["dns"]);
}

/// Review imp-net M7: an imported subnet's own NAT table that carries another route keeps it
/// when `nat_gateway` is removed: only the 0.0.0.0/0 route goes, the table stays the subnet's.
#[test]
fn removing_nat_gateway_from_an_imported_table_keeps_its_other_routes() {
    let env = Env::new();
    let b = brownfield_with(&env.emu, false);
    let ec2 = env.emu.ec2();
    let (subnet, rt) = b.private[0].clone();
    block_on(async {
        let route = ec2.create_route().route_table_id(&rt).destination_cidr_block("10.200.0.0/16");
        route.gateway_id(&b.igw).send().await.unwrap();
    });
    let ctx = ctx(&env.emu);
    let imported = import(&ctx, "subnet", &subnet);
    assert_eq!(imported.observed.attrs.get("nat_gateway"), Some(&Value::str(&b.nat)));
    let k = kind("subnet").unwrap();
    block_on(k.tag_imported(&ctx, "subnet.a", &subnet, &imported.observed.outputs)).unwrap();
    let old = imported.observed.attrs.clone();
    let mut new = old.clone();
    new.remove("nat_gateway");
    block_on(k.update(&ctx, "subnet.a", &subnet, &old, &new, &["nat_gateway".to_string()])).unwrap();
    let table = block_on(async {
        let f = Filter::builder().name("route-table-id").values(&rt).build();
        ec2.describe_route_tables().filters(f).send().await.unwrap().route_tables().first().cloned()
    })
    .expect("the table stays");
    let dests: Vec<&str> = table.routes().iter().filter_map(|r| r.destination_cidr_block()).collect();
    assert!(dests.contains(&"10.200.0.0/16") && !dests.contains(&"0.0.0.0/0"), "{dests:?}");
    assert!(table.associations().iter().any(|a| a.subnet_id() == Some(subnet.as_str())), "still the subnet's");
    assert_eq!(refreshed(&ctx, "subnet", "subnet.a").attrs.get("nat_gateway"), None);
}

/// Review imp-net m2: a gateway routed only from the main table is not what
/// `internet_gateway = true` says: the import leaves it untagged, so destroy never deletes it.
#[test]
fn a_gateway_routed_only_from_the_main_table_is_not_tagged_into_the_stack() {
    let env = Env::new();
    let ec2 = env.emu.ec2();
    let (vpc, igw) = block_on(async {
        let vpc = ec2.create_vpc().cidr_block("10.8.0.0/16").send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let igw = ec2.create_internet_gateway().send().await.unwrap();
        let igw = igw.internet_gateway().unwrap().internet_gateway_id().unwrap().to_string();
        ec2.attach_internet_gateway().internet_gateway_id(&igw).vpc_id(&vpc).send().await.unwrap();
        let f = Filter::builder().name("vpc-id").values(&vpc).build();
        let main = ec2.describe_route_tables().filters(f).send().await.unwrap();
        let main = main.route_tables()[0].route_table_id().unwrap().to_string();
        let route = ec2.create_route().route_table_id(&main).destination_cidr_block("0.0.0.0/0");
        route.gateway_id(&igw).send().await.unwrap();
        (vpc, igw)
    });
    let ctx = ctx(&env.emu);
    let imported = import(&ctx, "vpc", &vpc);
    assert_eq!(imported.observed.attrs.get("internet_gateway"), Some(&Value::Bool(false)));
    assert!(imported.unexpressed.iter().any(|(f, v)| f == "internet_gateway" && v.contains(&igw)));
    block_on(kind("vpc").unwrap().tag_imported(&ctx, "vpc.main", &vpc, &imported.observed.outputs)).unwrap();
    assert!(tags_of(&ec2, &vpc).contains_key("gpustack:stack"));
    assert!(!tags_of(&ec2, &igw).contains_key("gpustack:stack"), "the gateway stays foreign");
}
