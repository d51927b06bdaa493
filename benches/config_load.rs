//! Loading and validating a config of 10,000 modes from a file (and 100,000, to check it is
//! linear). Targets: <= 20 ms for 10,000; 100,000 <= 10x that. `cargo bench --bench config_load`

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
}

criterion_group!(benches, config_load);
criterion_main!(benches);
