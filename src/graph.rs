//! The resource DAG: built from references and `depends_on`, checked for cycles
//! (each loop reported with every edge and where it is written), ordered for
//! the planner, and drawn as DOT or Mermaid. No network.

use std::collections::VecDeque;

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::stack::{Diagnostic, Resource, Source, Span, Stack};

/// Edges point from a resource to what it depends on (Terraform's convention).
fn build(resources: &[Resource]) -> DiGraph<(), ()> {
    let mut g = DiGraph::with_capacity(resources.len(), resources.len() * 2);
    for _ in resources {
        g.add_node(());
    }
    for (i, r) in resources.iter().enumerate() {
        for &d in &r.deps {
            g.add_edge(NodeIndex::new(i), NodeIndex::new(d), ());
        }
    }
    g
}

/// One diagnostic per reference cycle, listing each edge of one loop through it.
pub fn cycle_diagnostics(resources: &[Resource], source: &Source) -> Vec<Diagnostic> {
    let g = build(resources);
    let mut out = vec![];
    for scc in tarjan_scc(&g) {
        let start = scc.iter().map(|n| n.index()).min().unwrap_or(0);
        let self_loop = resources[start].deps.contains(&start);
        if scc.len() < 2 && !self_loop {
            continue;
        }
        let members: Vec<bool> = {
            let mut m = vec![false; resources.len()];
            scc.iter().for_each(|n| m[n.index()] = true);
            m
        };
        let path = if self_loop { vec![start] } else { loop_through(resources, start, &members) };
        out.push(cycle_diagnostic(resources, source, &path));
    }
    out
}

/// The diagnostic for one loop. Each edge says where it is written; an edge the file does
/// not write (gpustack adds it: a node group waits for its cluster's `vpc-cni` add-on,
/// `resources::add_implicit_edges`) says so, and the help offers only the edges the user
/// can remove.
fn cycle_diagnostic(resources: &[Resource], source: &Source, path: &[usize]) -> Diagnostic {
    let mut edges = vec![];
    let mut removable = vec![];
    for (k, &from) in path.iter().enumerate() {
        let (from, to) = (&resources[from], &resources[path[(k + 1) % path.len()]]);
        let edge = format!("{} → {}", from.address, to.address);
        match reference_site(from, &to.address) {
            Some(at) => {
                edges.push(format!("  {edge} (at {})", source.location(&Some(at))));
                removable.push(edge);
            }
            None => edges.push(format!(
                "  {edge} (not written: gpustack adds it, a node group waits for its cluster's vpc-cni add-on)"
            )),
        }
    }
    let first = &resources[path[0]];
    let span = reference_site(first, &resources[path[1 % path.len()]].address).or(first.span.clone());
    let names: Vec<&str> = path.iter().map(|&i| resources[i].address.as_str()).collect();
    let help = match removable.as_slice() {
        _ if removable.len() == path.len() => {
            "a resource cannot depend on itself through references; remove one of these references or depends_on entries"
                .to_string()
        }
        [one] => format!("a resource cannot depend on itself; remove the reference or depends_on entry {one}"),
        _ => format!(
            "a resource cannot depend on itself; remove one of the references or depends_on entries {}",
            removable.join(", ")
        ),
    };
    Diagnostic::error(format!("reference cycle: {} → {}\n{}", names.join(" → "), names[0], edges.join("\n")), span)
        .help(help)
}

/// The shortest loop from `start` back to itself, staying inside the cycle's members.
fn loop_through(resources: &[Resource], start: usize, members: &[bool]) -> Vec<usize> {
    let mut parent = vec![usize::MAX; resources.len()];
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for &d in &resources[n].deps {
            if !members[d] {
                continue;
            }
            if d == start {
                let mut path = vec![n];
                let mut cur = n;
                while cur != start {
                    cur = parent[cur];
                    path.push(cur);
                }
                path.reverse();
                return path;
            }
            if parent[d] == usize::MAX {
                parent[d] = n;
                queue.push_back(d);
            }
        }
    }
    vec![start]
}

/// Where resource `r` refers to `target` (an attribute reference or its depends_on).
pub fn reference_site(r: &Resource, target: &str) -> Span {
    let mut refs = vec![];
    for e in r.attrs.values() {
        e.refs(&mut refs);
    }
    refs.extend(r.depends_on.iter().cloned());
    refs.into_iter().find(|x| x.address == target).and_then(|x| x.span)
}

/// Resource indices with every dependency before its dependents (Kahn's algorithm;
/// ties keep file order). The stack is known to be acyclic.
pub fn topo_order(resources: &[Resource]) -> Vec<usize> {
    let n = resources.len();
    let mut indegree = vec![0usize; n];
    let mut dependents: Vec<Vec<usize>> = vec![vec![]; n];
    for (i, r) in resources.iter().enumerate() {
        indegree[i] = r.deps.len();
        for &d in &r.deps {
            dependents[d].push(i);
        }
    }
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = queue.pop_front() {
        order.push(i);
        for &j in &dependents[i] {
            indegree[j] -= 1;
            if indegree[j] == 0 {
                queue.push_back(j);
            }
        }
    }
    order
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Dot,
    Mermaid,
}

/// The stack's DAG as text. Edges point from a resource to what it depends on.
pub fn render(stack: &Stack, format: Format) -> String {
    let mut out = String::new();
    match format {
        Format::Dot => {
            out.push_str(&format!("digraph \"{}\" {{\n  rankdir = \"RL\";\n  node [shape = box];\n", stack.name));
            for r in &stack.resources {
                out.push_str(&format!("  \"{}\";\n", r.address));
            }
            for r in &stack.resources {
                for &d in &r.deps {
                    out.push_str(&format!("  \"{}\" -> \"{}\";\n", r.address, stack.resources[d].address));
                }
            }
            out.push_str("}\n");
        }
        Format::Mermaid => {
            out.push_str("flowchart RL\n");
            let id = |a: &str| a.replace(['.', '-'], "_");
            for r in &stack.resources {
                out.push_str(&format!("  {}[\"{}\"]\n", id(&r.address), r.address));
            }
            for r in &stack.resources {
                for &d in &r.deps {
                    out.push_str(&format!("  {} --> {}\n", id(&r.address), id(&stack.resources[d].address)));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::VarSources;

    fn load(text: &str) -> Result<Stack, Box<crate::stack::Diagnostics>> {
        let env = |k: &str| (k == "admin_cidr").then(|| "198.51.100.7/32".to_string());
        crate::load::check(Source::new("g.toml", text.into()), &VarSources { cli: &[], env: &env })
    }

    const HEAD: &str = "[stack]\nname = \"g\"\nregion = \"us-west-2\"\n";

    #[test]
    fn dependencies_come_first_and_ties_keep_file_order() {
        let text = format!(
            "{HEAD}[subnet.b]\nvpc = \"${{vpc.main.id}}\"\ncidr_block = \"10.0.16.0/20\"\navailability_zone = \"us-west-2b\"\n\
             [subnet.a]\nvpc = \"${{vpc.main.id}}\"\ncidr_block = \"10.0.0.0/20\"\navailability_zone = \"us-west-2a\"\n\
             [vpc.main]\ncidr_block = \"10.0.0.0/16\"\n"
        );
        let s = load(&text).unwrap_or_else(|d| panic!("{}", d.render(false)));
        let order: Vec<&str> = topo_order(&s.resources).into_iter().map(|i| s.resources[i].address.as_str()).collect();
        assert_eq!(order, ["vpc.main", "subnet.b", "subnet.a"]);
    }

    #[test]
    fn a_cycle_names_every_edge_and_where_it_is_written() {
        let text = format!(
            "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n\
             [security_group.a]\nvpc = \"${{vpc.main.id}}\"\ndepends_on = [\"security_group.b\"]\n\
             [security_group.b]\nvpc = \"${{vpc.main.id}}\"\ndepends_on = [\"security_group.a\"]\n"
        );
        let d = load(&text).err().expect("a cycle is an error");
        let cycle = d.items.iter().find(|i| i.message.starts_with("reference cycle")).expect("a cycle diagnostic");
        assert!(cycle.message.contains("security_group.a → security_group.b → security_group.a"), "{}", cycle.message);
        assert!(cycle.message.contains("  security_group.a → security_group.b (at g.toml:8:"), "{}", cycle.message);
        assert!(cycle.message.contains("  security_group.b → security_group.a (at g.toml:11:"), "{}", cycle.message);
        assert_eq!(d.items.iter().filter(|i| i.message.starts_with("reference cycle")).count(), 1);
    }

    #[test]
    fn a_cycle_through_an_edge_gpustack_adds_offers_only_the_written_edge() {
        // A node group waits for its cluster's vpc-cni add-on: that edge is in no line of
        // the file, so it cannot be the one to remove.
        let text = format!(
            "{HEAD}[iam_role.c]\nservice = \"eks.amazonaws.com\"\n\
             [eks_cluster.main]\nversion = \"1.33\"\nrole = \"${{iam_role.c.arn}}\"\nsubnets = [\"subnet-1\"]\n\
             [eks_addon.cni]\ncluster = \"${{eks_cluster.main.name}}\"\naddon = \"vpc-cni\"\ndepends_on = [\"node_group.n\"]\n\
             [node_group.n]\ncluster = \"${{eks_cluster.main.name}}\"\nnode_role = \"${{iam_role.c.arn}}\"\nsubnets = [\"subnet-1\"]\n"
        );
        let d = load(&text).err().expect("a cycle is an error");
        let cycle = d.items.iter().find(|i| i.message.starts_with("reference cycle")).expect("a cycle diagnostic");
        assert!(cycle.message.contains("  eks_addon.cni → node_group.n (at g.toml:13:"), "{}", cycle.message);
        assert!(
            cycle.message.contains("  node_group.n → eks_addon.cni (not written: gpustack adds it, a node group waits for its cluster's vpc-cni add-on)"),
            "{}",
            cycle.message
        );
        assert_eq!(
            cycle.help.as_deref(),
            Some(
                "a resource cannot depend on itself; remove the reference or depends_on entry eks_addon.cni → node_group.n"
            )
        );
    }

    #[test]
    fn a_resource_that_depends_on_itself_is_a_cycle() {
        let text = format!("{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\ndepends_on = [\"vpc.main\"]\n");
        let d = load(&text).err().expect("a self-reference is an error");
        assert!(d.items.iter().any(|i| i.message.starts_with("reference cycle: vpc.main → vpc.main")));
    }

    #[test]
    fn node_groups_wait_for_their_clusters_vpc_cni_and_the_graph_shows_it() {
        let s = load(include_str!("../stacks/quickstart.toml")).unwrap_or_else(|d| panic!("{}", d.render(false)));
        let ng = s.get("node_group.gpu").unwrap();
        let cni = s.by_address["eks_addon.vpc_cni"];
        assert!(ng.deps.contains(&cni));
        assert!(render(&s, Format::Dot).contains("\"node_group.gpu\" -> \"eks_addon.vpc_cni\";"));
        assert!(render(&s, Format::Mermaid).contains("node_group_gpu --> eks_addon_vpc_cni"));
    }
}
