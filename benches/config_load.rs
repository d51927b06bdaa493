//! Loading and validating a config of 10,000 modes from a file (and 100,000, to check it is
//! linear). Targets: <= 20 ms for 10,000; 100,000 <= 10x that. And one mode whose tool lists are
//! each one line of 3,000 and 30,000 names, all unknown (issue 19 item 7: this aborted the
//! process); 30,000 <= 10x 3,000. `cargo bench --bench config_load`

mod fixture;

use std::time::Duration;

use agent_controller::ToolRegistry;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn config_load(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tmp");
    let tools = ToolRegistry::with_workspace_tools();
    let mut group = c.benchmark_group("config_load");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    for modes in [10_000usize, 100_000] {
        let path = dir.path().join(format!("modes-{modes}.toml"));
        std::fs::write(&path, fixture::many_modes_toml(modes)).expect("write config");
        group.bench_with_input(BenchmarkId::from_parameter(modes), &path, |b, path| {
            b.iter(|| fixture::load_and_validate(path, &tools));
        });
    }
    group.finish();

    // One mode whose tool lists are each one line of N names, parsed and checked against tools
    // that know none of them (N errors): linear in N, like the modes above.
    let mut group = c.benchmark_group("config_long_tool_list");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for names in [3_000usize, 30_000] {
        let text = fixture::long_tool_list_toml(names);
        group.bench_with_input(BenchmarkId::from_parameter(names), &text, |b, text| {
            b.iter(|| agent_controller::config::check_with_tools(text, "long.toml", |_| false));
        });
    }
    group.finish();
}

criterion_group!(benches, config_load);
criterion_main!(benches);
