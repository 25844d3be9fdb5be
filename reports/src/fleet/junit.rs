//! The fleet as JUnit XML.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::{FleetNode, FleetRecord, FleetReportError, plugin_name};

/// The fleet as JUnit XML: one `<testsuite>` per node × plugin (the run's clauses as its
/// testcases, classname `<node>.<kind>.<operation>`), and for a node without a (complete)
/// record a `<testsuite>` named after the node with one failing (no record, lost) or errored
/// (not finished, unreadable, bad record) testcase that says so.
pub fn render_junit(fleet: &FleetRecord) -> Result<String, FleetReportError> {
    let mut report = Report::new(format!("nomad-conform fleet {}", fleet.job));
    report.set_timestamp(fleet.collected_at.fixed_offset());
    for (_, node) in fleet.nodes_in_order() {
        let node_props = node_properties(fleet, node);
        for problem in &node.problems {
            let mut suite = TestSuite::new(format!("{}: {}", node.name(), problem.kind.as_str()));
            suite.set_timestamp(fleet.collected_at.fixed_offset());
            for (k, v) in &node_props {
                suite.add_property(Property::new(k.clone(), v.clone()));
            }
            let kind = if problem.kind.is_error() {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            };
            let mut status = TestCaseStatus::non_success(kind);
            status.set_type(problem.kind.as_str());
            status.set_message(first_line(&problem.message));
            status.set_description(format!(
                "node {} ({}), allocation {} ({}): {}\n",
                node.name(),
                node.node_id,
                node.allocation.id,
                node.allocation.client_status,
                problem.message
            ));
            let mut tc = TestCase::new(
                format!("{}: {}", node.name(), problem.kind.as_str()),
                status,
            );
            tc.set_classname(format!("{}.fleet", node.name()));
            tc.set_time(Duration::ZERO);
            suite.add_test_case(tc);
            suite.set_time(Duration::ZERO);
            report.add_test_suite(suite);
        }
        for nr in &node.records {
            let rec = &nr.record;
            let mut suite = TestSuite::new(format!(
                "{}: {} {}",
                node.name(),
                rec.kind,
                plugin_name(rec)
            ));
            suite.set_timestamp(rec.started_at.fixed_offset());
            for (k, v) in node_props
                .iter()
                .cloned()
                .chain(crate::junit::properties(rec))
                .chain([("record.file".to_string(), nr.file.clone())])
            {
                suite.add_property(Property::new(k, v));
            }
            let mut total = Duration::ZERO;
            for case in &rec.cases {
                let mut tc = crate::junit::testcase(rec, case);
                tc.set_classname(format!("{}.{}", node.name(), case.classname()));
                total += Duration::from_millis(case.duration_ms);
                suite.add_test_case(tc);
            }
            suite.set_time(total);
            report.add_test_suite(suite);
        }
    }
    let xml = report.to_string().map_err(crate::junit::JunitError::from)?;
    Ok(crate::junit::strip_root_attributes(&xml)?)
}

fn node_properties(fleet: &FleetRecord, node: &FleetNode) -> Vec<(String, String)> {
    vec![
        ("fleet.job".into(), fleet.job.clone()),
        ("fleet.namespace".into(), fleet.namespace.clone()),
        ("node.name".into(), node.node_name.clone()),
        ("node.id".into(), node.node_id.clone()),
        ("allocation.id".into(), node.allocation.id.clone()),
        (
            "allocation.client_status".into(),
            node.allocation.client_status.clone(),
        ),
    ]
}

fn first_line(s: &str) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    const MAX: usize = 200;
    if line.chars().count() > MAX {
        let cut: String = line.chars().take(MAX).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}
