//! `--name value` flags of the footprint and simulation programs: each reads
//! a few numbers with defaults, too few to need a command-line parser.

use std::fmt::Display;
use std::str::FromStr;

/// The value after `name` in `args`, or `default` when `name` is absent.
///
/// # Errors
/// A message naming the flag when its value is missing or does not parse.
pub fn value<T>(args: &[String], name: &str, default: T) -> Result<T, String>
where
    T: FromStr,
    T::Err: Display,
{
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .ok_or(format!("{name} needs a value"))?
            .parse()
            .map_err(|e| format!("{name}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::value;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn reads_a_value_falls_back_and_names_the_flag_in_errors() {
        let a = args(&["--n", "7", "--m"]);
        assert_eq!(value(&a, "--n", 1u64), Ok(7));
        assert_eq!(value(&a, "--k", 3usize), Ok(3));
        assert_eq!(value::<u64>(&a, "--m", 1), Err("--m needs a value".into()));
        let bad = args(&["--n", "x"]);
        assert!(value::<u64>(&bad, "--n", 1)
            .unwrap_err()
            .starts_with("--n: "));
    }
}
