//! Evaluation of HCL expressions (attribute values, `Literal` specs, JSON string templates)
//! with the function set Nomad offers there (`abs`, `coalesce`, `concat`, `hasindex`, `int`,
//! `jsondecode`, `jsonencode`, `length`, `lower`, `max`, `min`, `reverse`, `strlen`, `substr`,
//! `upper`) and no variables: `${...}` interpolation of variables is not supported.

use std::str::FromStr;

use hcl::eval::{Context, Evaluate, FuncArgs, FuncDef, ParamType};
use hcl::template::Element;
use hcl::{Expression, Template};

use crate::number::Number;
use crate::types::one_line;
use crate::value::Value;

/// The evaluation context: Nomad's stdlib functions, no variables.
pub(crate) fn context() -> Context<'static> {
    let mut ctx = Context::new();
    let s = || ParamType::String;
    let n = || ParamType::Number;
    ctx.declare_func("upper", FuncDef::new(upper, [s()]));
    ctx.declare_func("lower", FuncDef::new(lower, [s()]));
    ctx.declare_func("reverse", FuncDef::new(reverse, [s()]));
    ctx.declare_func("strlen", FuncDef::new(strlen, [s()]));
    ctx.declare_func("substr", FuncDef::new(substr, [s(), n(), n()]));
    ctx.declare_func("abs", FuncDef::new(abs, [n()]));
    ctx.declare_func("int", FuncDef::new(int, [n()]));
    let variadic = |p: ParamType, f| FuncDef::builder().variadic_param(p).build(f);
    ctx.declare_func("min", variadic(n(), min));
    ctx.declare_func("max", variadic(n(), max));
    ctx.declare_func("coalesce", variadic(ParamType::Any, coalesce));
    ctx.declare_func("concat", variadic(ParamType::Any, concat));
    ctx.declare_func("length", FuncDef::new(length, [ParamType::Any]));
    ctx.declare_func(
        "hasindex",
        FuncDef::new(hasindex, [ParamType::Any, ParamType::Any]),
    );
    ctx.declare_func("jsonencode", FuncDef::new(jsonencode, [ParamType::Any]));
    ctx.declare_func("jsondecode", FuncDef::new(jsondecode, [s()]));
    ctx
}

/// Evaluates an HCL expression to a [`Value`] (arrays become tuples, objects objects).
pub(crate) fn eval_expression(expr: &Expression, ctx: &Context) -> Result<Value, String> {
    expr.evaluate(ctx)
        .map(from_hcl_value)
        .map_err(|e| explain(&one_line(&e)))
}

/// Parses and evaluates an expression written as text (a `Literal` spec's value).
pub(crate) fn eval_source(src: &str) -> Result<Value, String> {
    let expr = Expression::from_str(src.trim())
        .map_err(|e| format!("{src:?} is not an HCL expression: {}", one_line(&e)))?;
    eval_expression(&expr, &context())
}

/// Evaluates a JSON string the way HCL's JSON syntax does: as a template, so `$${` stands for
/// a literal `${`, and a string that is one `${...}` yields that expression's value.
pub(crate) fn eval_json_string(s: &str, ctx: &Context) -> Result<Value, String> {
    if !s.contains("${") && !s.contains("%{") {
        return Ok(Value::String(s.to_string()));
    }
    let template =
        Template::from_str(s).map_err(|e| format!("invalid template {s:?}: {}", one_line(&e)))?;
    if let [Element::Interpolation(interp)] = template.elements() {
        return eval_expression(&interp.expr, ctx);
    }
    template
        .evaluate(ctx)
        .map(Value::String)
        .map_err(|e| explain(&one_line(&e)))
}

fn explain(msg: &str) -> String {
    if msg.contains("undefined variable") {
        format!("{msg} (variables and ${{...}} interpolation of them are not supported here)")
    } else {
        msg.to_string()
    }
}

/// Converts an evaluated hcl-rs value into a [`Value`].
pub(crate) fn from_hcl_value(v: hcl::Value) -> Value {
    match v {
        hcl::Value::Null => Value::Null,
        hcl::Value::Bool(b) => Value::Bool(b),
        hcl::Value::Number(n) => Value::Number(from_hcl_number(&n)),
        hcl::Value::String(s) => Value::String(s),
        hcl::Value::Array(a) => Value::Tuple(a.into_iter().map(from_hcl_value).collect()),
        hcl::Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (k, from_hcl_value(v))).collect())
        }
    }
}

fn from_hcl_number(n: &hcl::Number) -> Number {
    if let Some(i) = n.as_i64() {
        Number::from_i64(i)
    } else if let Some(u) = n.as_u64() {
        Number::from_u64(u)
    } else {
        n.as_f64()
            .and_then(Number::from_f64)
            .unwrap_or_else(Number::zero)
    }
}

fn to_hcl_value(v: &Value) -> hcl::Value {
    match v {
        Value::Null => hcl::Value::Null,
        Value::Bool(b) => hcl::Value::Bool(*b),
        Value::Number(n) => match n.to_i64() {
            Some(i) => hcl::Value::from(i),
            None => hcl::Number::from_f64(n.to_f64_lossy())
                .map(hcl::Value::Number)
                .unwrap_or(hcl::Value::Null),
        },
        Value::String(s) => hcl::Value::String(s.clone()),
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => {
            hcl::Value::Array(e.iter().map(to_hcl_value).collect())
        }
        Value::Map(m) | Value::Object(m) => hcl::Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), to_hcl_value(v)))
                .collect(),
        ),
    }
}

fn arg_str(args: &FuncArgs, i: usize) -> Result<&str, String> {
    args.get(i)
        .and_then(hcl::Value::as_str)
        .ok_or_else(|| format!("argument {i} must be a string"))
}

fn arg_num(args: &FuncArgs, i: usize) -> Result<hcl::Number, String> {
    args.get(i)
        .and_then(hcl::Value::as_number)
        .copied()
        .ok_or_else(|| format!("argument {i} must be a number"))
}

fn upper(args: FuncArgs) -> Result<hcl::Value, String> {
    Ok(hcl::Value::String(arg_str(&args, 0)?.to_uppercase()))
}

fn lower(args: FuncArgs) -> Result<hcl::Value, String> {
    Ok(hcl::Value::String(arg_str(&args, 0)?.to_lowercase()))
}

fn reverse(args: FuncArgs) -> Result<hcl::Value, String> {
    Ok(hcl::Value::String(
        arg_str(&args, 0)?.chars().rev().collect(),
    ))
}

fn strlen(args: FuncArgs) -> Result<hcl::Value, String> {
    Ok(hcl::Value::from(arg_str(&args, 0)?.chars().count() as u64))
}

fn substr(args: FuncArgs) -> Result<hcl::Value, String> {
    let chars: Vec<char> = arg_str(&args, 0)?.chars().collect();
    let len = chars.len() as i64;
    let offset = arg_num(&args, 1)?
        .as_i64()
        .ok_or("offset must be a whole number")?;
    let length = arg_num(&args, 2)?
        .as_i64()
        .ok_or("length must be a whole number")?;
    let start = if offset < 0 { len + offset } else { offset };
    if start < 0 || start > len {
        return Err("offset is out of range".into());
    }
    let end = if length < 0 {
        len
    } else {
        start.saturating_add(length).min(len)
    };
    Ok(hcl::Value::String(
        chars[start as usize..end as usize].iter().collect(),
    ))
}

fn abs(args: FuncArgs) -> Result<hcl::Value, String> {
    let n = arg_num(&args, 0)?;
    match n.as_i64() {
        Some(i) if i != i64::MIN => Ok(hcl::Value::from(i.abs())),
        _ => number_value(n.as_f64().unwrap_or(0.0).abs()),
    }
}

fn int(args: FuncArgs) -> Result<hcl::Value, String> {
    let n = arg_num(&args, 0)?;
    match n.as_i64() {
        Some(i) => Ok(hcl::Value::from(i)),
        None => number_value(n.as_f64().unwrap_or(0.0).trunc()),
    }
}

fn number_value(f: f64) -> Result<hcl::Value, String> {
    hcl::Number::from_f64(f)
        .map(hcl::Value::Number)
        .ok_or_else(|| "result is not a finite number".to_string())
}

fn extremum(args: FuncArgs, want: std::cmp::Ordering) -> Result<hcl::Value, String> {
    let mut best: Option<(Number, hcl::Number)> = None;
    for i in 0..args.len() {
        let n = arg_num(&args, i)?;
        let exact = from_hcl_number(&n);
        if best.as_ref().is_none_or(|(b, _)| exact.cmp(b) == want) {
            best = Some((exact, n));
        }
    }
    best.map(|(_, n)| hcl::Value::Number(n))
        .ok_or_else(|| "at least one argument is required".to_string())
}

fn min(args: FuncArgs) -> Result<hcl::Value, String> {
    extremum(args, std::cmp::Ordering::Less)
}

fn max(args: FuncArgs) -> Result<hcl::Value, String> {
    extremum(args, std::cmp::Ordering::Greater)
}

fn coalesce(args: FuncArgs) -> Result<hcl::Value, String> {
    args.iter()
        .find(|v| !v.is_null())
        .cloned()
        .ok_or_else(|| "no non-null arguments".to_string())
}

fn concat(args: FuncArgs) -> Result<hcl::Value, String> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        match a {
            hcl::Value::Array(items) => out.extend(items.iter().cloned()),
            _ => return Err(format!("argument {i} must be a list")),
        }
    }
    Ok(hcl::Value::Array(out))
}

fn length(args: FuncArgs) -> Result<hcl::Value, String> {
    match &args[0] {
        hcl::Value::Array(a) => Ok(hcl::Value::from(a.len() as u64)),
        hcl::Value::Object(o) => Ok(hcl::Value::from(o.len() as u64)),
        _ => Err("collection must be a list, a map or a tuple".into()),
    }
}

fn hasindex(args: FuncArgs) -> Result<hcl::Value, String> {
    let found = match (&args[0], &args[1]) {
        (hcl::Value::Array(a), hcl::Value::Number(n)) => n
            .as_u64()
            .is_some_and(|i| usize::try_from(i).is_ok_and(|i| i < a.len())),
        (hcl::Value::Object(o), hcl::Value::String(k)) => o.contains_key(k),
        _ => false,
    };
    Ok(hcl::Value::Bool(found))
}

fn jsonencode(args: FuncArgs) -> Result<hcl::Value, String> {
    let v = from_hcl_value(args[0].clone());
    serde_json::to_string(&v.to_json())
        .map(hcl::Value::String)
        .map_err(|e| e.to_string())
}

fn jsondecode(args: FuncArgs) -> Result<hcl::Value, String> {
    let parsed: serde_json::Value =
        serde_json::from_str(arg_str(&args, 0)?).map_err(|e| e.to_string())?;
    Ok(to_hcl_value(&crate::json_input::plain_json_value(&parsed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_evaluate() {
        assert_eq!(eval_source("true"), Ok(Value::Bool(true)));
        assert_eq!(eval_source("\"SIGTERM\""), Ok(Value::string("SIGTERM")));
        assert_eq!(eval_source("[]"), Ok(Value::Tuple(vec![])));
        assert_eq!(eval_source("-5"), Ok(Value::int(-5)));
        assert_eq!(eval_source("reverse(\"hi\")"), Ok(Value::string("ih")));
        assert_eq!(eval_source("upper(\"a\")"), Ok(Value::string("A")));
        assert_eq!(eval_source("max(1, 7, 3)"), Ok(Value::int(7)));
        assert_eq!(
            eval_source("substr(\"hello\", 1, 3)"),
            Ok(Value::string("ell"))
        );
        assert_eq!(eval_source("length([1, 2])"), Ok(Value::int(2)));
        assert!(eval_source("nope(1)").is_err());
        assert!(eval_source("var.x").is_err());
    }

    #[test]
    fn json_strings_are_templates() {
        let ctx = context();
        assert_eq!(eval_json_string("plain", &ctx), Ok(Value::string("plain")));
        assert_eq!(eval_json_string("$${x}", &ctx), Ok(Value::string("${x}")));
        assert_eq!(eval_json_string("${1 + 2}", &ctx), Ok(Value::int(3)));
        let err = eval_json_string("${NOMAD_TASK_DIR}/x", &ctx).unwrap_err();
        assert!(err.contains("not supported"), "{err}");
    }
}
