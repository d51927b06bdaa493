//! The full in-memory cycle: new session in `plan` -> message -> the scripted model calls
//! `submit_plan` on a small plan file -> suspend -> approve -> `mode_changed` -> run completes.
//! Target: <= 40 us (median). Beside it the question cycle (issue 37): new session -> message ->
//! the model calls `ask_user` -> the run awaits the answer -> answered -> resumed -> run
//! completes; target: no more than the plan cycle. `cargo bench --bench cycle`

mod fixture;

use criterion::{Criterion, criterion_group, criterion_main};
use fixture::{Fixture, QuestionFixture};

fn cycle(c: &mut Criterion) {
    let fixture = Fixture::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    c.bench_function("cycle/plan_submit_approve_complete", |b| {
        b.to_async(&rt).iter(|| fixture.cycle());
    });
    // The issue 37 target: a question cycle costs no more than the plan cycle above.
    let questions = QuestionFixture::new();
    c.bench_function("cycle/question_ask_answer_complete", |b| {
        b.to_async(&rt).iter(|| questions.cycle());
    });
    c.bench_function("cycle/suspend_only", |b| {
        b.to_async(&rt).iter(|| async {
            let suspended = fixture.suspended().await;
            std::hint::black_box(suspended);
        });
    });
}

criterion_group!(benches, cycle);
criterion_main!(benches);
