//! Welch's two-sample t-test, for deciding whether repeated runs really differ.
//!
//! Why Welch and not Mann–Whitney U: CI runs each side 3–5 times, and with three
//! runs per side the smallest two-sided p-value an exact U test can reach is 0.1,
//! so it could never flag anything at α = 0.05. Welch's test does not assume equal
//! variances (base and head can be noisier than each other) and gives usable
//! p-values from three runs, at the price of assuming roughly normal per-run
//! values, which per-run percentiles of a steady load are close enough to.
//!
//! The Student t distribution is evaluated through the regularized incomplete
//! beta function (continued fraction, as in Numerical Recipes §6.4).

/// The outcome of a two-sided Welch's t-test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    /// The t statistic, positive when the second sample's mean is larger.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value: the probability of a difference at least this large if the means were equal.
    pub p: f64,
}

/// Welch's t-test of `a` against `b`; `None` when either side has fewer than two values.
///
/// When both samples have zero variance, the means either match (p = 1) or differ
/// with certainty (p = 0).
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (mean_a, var_a) = mean_variance(a);
    let (mean_b, var_b) = mean_variance(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let se2_a = var_a / na;
    let se2_b = var_b / nb;
    let se2 = se2_a + se2_b;
    let diff = mean_b - mean_a;
    if se2 <= 0.0 {
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        let t = if diff == 0.0 {
            0.0
        } else {
            diff.signum() * f64::INFINITY
        };
        return Some(Welch {
            t,
            df: na + nb - 2.0,
            p,
        });
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (se2_a * se2_a / (na - 1.0) + se2_b * se2_b / (nb - 1.0));
    Some(Welch {
        t,
        df,
        p: two_sided_p(t, df),
    })
}

/// Sample mean and unbiased (n − 1) variance.
pub fn mean_variance(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// Two-sided tail probability of Student's t distribution with `df` degrees of freedom.
fn two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    let x = df / (df + t * t);
    regularized_incomplete_beta(x, df / 2.0, 0.5).clamp(0.0, 1.0)
}

/// I_x(a, b), the regularized incomplete beta function.
fn regularized_incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    // The continued fraction converges fast for x < (a + 1) / (a + b + 2); use the
    // symmetry I_x(a, b) = 1 − I_{1−x}(b, a) on the other side.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(x, a, b) / a
    } else {
        1.0 - front * beta_continued_fraction(1.0 - x, b, a) / b
    }
}

/// Lentz's method for the incomplete beta continued fraction.
fn beta_continued_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPSILON: f64 = 1e-15;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        // Even step.
        let aa = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        // Odd step.
        let aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < EPSILON {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos approximation, g = 7, n = 9).
fn ln_gamma(x: f64) -> f64 {
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEFFICIENTS[0];
    for (i, c) in COEFFICIENTS.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        assert!(close(ln_gamma(1.0), 0.0, 1e-12));
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-12));
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-12
        ));
    }

    #[test]
    fn student_t_tails_match_tables() {
        // t = 1 with 1 df is the Cauchy quartile: two-sided p = 0.5.
        assert!(close(two_sided_p(1.0, 1.0), 0.5, 1e-9));
        // Table values: t(0.975, 10) = 2.228139, t(0.995, 4) = 4.604095.
        assert!(close(two_sided_p(2.228_139, 10.0), 0.05, 1e-5));
        assert!(close(two_sided_p(4.604_095, 4.0), 0.01, 1e-5));
        assert!(close(two_sided_p(0.0, 7.0), 1.0, 1e-12));
    }

    #[test]
    fn welch_matches_scipy() {
        // scipy.stats.ttest_ind(b, a, equal_var=False) gives
        // t = 5.5549205986, df = 5.0103092784, p = 0.0025822171.
        let a = [10.0, 11.0, 9.0, 10.5];
        let b = [14.0, 15.5, 13.0, 16.0];
        let w = welch_t_test(&a, &b).unwrap();
        assert!(close(w.t, 5.554_920_598_6, 1e-9), "t = {}", w.t);
        assert!(close(w.df, 5.010_309_278_4, 1e-9), "df = {}", w.df);
        assert!(close(w.p, 0.002_582_217_1, 1e-8), "p = {}", w.p);
    }

    #[test]
    fn overlapping_samples_are_not_significant() {
        // scipy: p = 0.8340377964.
        let w = welch_t_test(&[100.0, 130.0, 90.0], &[110.0, 95.0, 125.0]).unwrap();
        assert!(close(w.p, 0.834_037_796_4, 1e-8), "p = {}", w.p);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(welch_t_test(&[1.0], &[1.0, 2.0]).is_none());
        assert_eq!(welch_t_test(&[5.0, 5.0], &[5.0, 5.0]).unwrap().p, 1.0);
        assert_eq!(welch_t_test(&[5.0, 5.0], &[6.0, 6.0]).unwrap().p, 0.0);
    }
}
