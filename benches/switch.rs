//! A manual mode switch with one event subscriber (alternating `plan` and `build`).
//! Target: <= 1 us (median). `cargo bench --bench switch`

mod fixture;

use criterion::{Criterion, criterion_group, criterion_main};
use fixture::Fixture;

fn switch(c: &mut Criterion) {
    let fixture = Fixture::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    c.bench_function("switch/one_subscriber", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            // A fresh session per sample, so its conversation (one notice per switch) stays
            // the size a real session has.
            let controller = fixture.controller.clone();
            let options = fixture.options();
            async move {
                let mut session = controller.start_session(options).await.expect("session");
                let start = std::time::Instant::now();
                for i in 0..iters {
                    let target = if i % 2 == 0 { "plan" } else { "build" };
                    let changed = session.switch_mode(target).await.expect("switch");
                    std::hint::black_box(changed);
                }
                start.elapsed()
            }
        });
    });
}

criterion_group!(benches, switch);
criterion_main!(benches);
