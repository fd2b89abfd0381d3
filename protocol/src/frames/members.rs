//! The members of one JSON object as the parsers read them: captured raw from a line (duplicate
//! keys refused at any depth), scanned, or from a parsed map; and [`Reader`], typed access to
//! them that names the frame and member in every error.

use super::types::{FrameError, FRAME_TYPES};
use crate::scan::{Scalar, ScalarDeserializer};
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

/// The members of one JSON object: raw (unparsed) from a line, scanned from a line, or a parsed
/// [`Map`]; `'a` is the lifetime of the text (or map) that strings may be borrowed from.
pub(super) trait Members<'a> {
    fn raw_get(&self, name: &str) -> Option<MemberRef<'_, 'a>>;
}

pub(super) enum MemberRef<'m, 'a> {
    Raw(&'a RawValue),
    Value(&'a Value),
    Scanned(&'m Scalar<'a>),
}

impl<'a> Members<'a> for crate::scan::Members<'a> {
    fn raw_get(&self, name: &str) -> Option<MemberRef<'_, 'a>> {
        self.get(name).map(MemberRef::Scanned)
    }
}

impl<'a> Members<'a> for &'a Map<String, Value> {
    fn raw_get(&self, name: &str) -> Option<MemberRef<'_, 'a>> {
        let map: &'a Map<String, Value> = self;
        map.get(name).map(MemberRef::Value)
    }
}

/// Top-level members of a line, each captured as a raw JSON slice; duplicate keys are an error.
pub(super) struct RawMembers<'a> {
    entries: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> Members<'a> for RawMembers<'a> {
    fn raw_get(&self, name: &str) -> Option<MemberRef<'_, 'a>> {
        self.entries
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, raw)| MemberRef::Raw(raw))
    }
}

impl<'de> Deserialize<'de> for RawMembers<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = RawMembers<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(Cow<'de, str>, &'de RawValue)> = Vec::with_capacity(8);
                let mut seen = SeenKeys::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    if !seen.insert(&key) {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    let raw: &'de RawValue = map.next_value()?;
                    entries.push((key, raw));
                }
                Ok(RawMembers { entries })
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

/// The keys of one object seen so far: a short list scanned linearly (frames have a handful of
/// members), switching to a hash set once it grows, so the duplicate check stays linear for an
/// object with many thousands of unknown members.
#[derive(Default)]
struct SeenKeys {
    few: Vec<String>,
    many: Option<std::collections::HashSet<String>>,
}

impl SeenKeys {
    const LINEAR_UP_TO: usize = 16;

    /// Records `key`; false when it was already seen.
    fn insert(&mut self, key: &str) -> bool {
        if let Some(many) = &mut self.many {
            return many.insert(key.to_string());
        }
        if self.few.iter().any(|seen| seen == key) {
            return false;
        }
        self.few.push(key.to_string());
        if self.few.len() > Self::LINEAR_UP_TO {
            self.many = Some(self.few.drain(..).collect());
        }
        true
    }
}

/// A JSON value parsed with every object's keys checked for duplicates at any depth (plain
/// `serde_json::Value` keeps the last duplicate silently). Used for the protocol's nested objects
/// (`capabilities`, `error`, `model`, `models` entries) read from a line.
struct UniqueValue(Value);

impl<'de> Deserialize<'de> for UniqueValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueValueVisitor)
    }
}

struct UniqueValueVisitor;

impl<'de> Visitor<'de> for UniqueValueVisitor {
    type Value = UniqueValue;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<UniqueValue, E> {
        Ok(UniqueValue(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<UniqueValue, E> {
        Ok(UniqueValue(Value::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<UniqueValue, E> {
        Ok(UniqueValue(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<UniqueValue, E> {
        Ok(UniqueValue(Value::from(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<UniqueValue, E> {
        Ok(UniqueValue(Value::String(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<UniqueValue, E> {
        Ok(UniqueValue(Value::String(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<UniqueValue, E> {
        Ok(UniqueValue(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<UniqueValue, E> {
        Ok(UniqueValue(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<UniqueValue, D::Error> {
        UniqueValue::deserialize(deserializer)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueValue, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(UniqueValue(Value::Array(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueValue, A::Error> {
        let mut object = Map::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let UniqueValue(value) = map.next_value()?;
            if object.insert(key.clone().into_owned(), value).is_some() {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
        }
        Ok(UniqueValue(Value::Object(object)))
    }
}

/// Reads a string as a `Cow`: borrowed from the line when it has no escapes, decoded otherwise;
/// `expecting` names what was wanted in the error of a non-string.
struct CowStrVisitor(&'static str);

impl<'de> Visitor<'de> for CowStrVisitor {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// A string member (`expecting` and so every error message are those of `String`).
pub(super) struct Text<'a>(pub(super) Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_string(CowStrVisitor("a string"))
            .map(Text)
    }
}

/// An object key.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_str(CowStrVisitor("a string key"))
            .map(Key)
    }
}

/// `serde_json` messages end with " at line L column C"; a frame is one line, so drop it.
pub(crate) fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(index) => message[..index].to_string(),
        None => message.to_string(),
    }
}

pub(super) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Typed access to the members of one object, naming the frame in every error.
pub(super) struct Reader<'m, M> {
    pub(super) members: &'m M,
    pub(super) what: &'static str,
}

impl<'a, M: Members<'a>> Reader<'_, M> {
    pub(super) fn optional<T: Deserialize<'a>>(
        &self,
        name: &str,
        expected: &str,
    ) -> Result<Option<T>, FrameError> {
        let Some(member) = self.members.raw_get(name) else {
            return Ok(None);
        };
        let parsed = match member {
            MemberRef::Raw(raw) => serde_json::from_str::<T>(raw.get()),
            MemberRef::Value(value) => T::deserialize(value),
            MemberRef::Scanned(scalar) => T::deserialize(ScalarDeserializer(scalar)),
        };
        parsed.map(Some).map_err(|error| {
            FrameError::invalid(format!(
                "{}: `{name}` must be {expected} ({})",
                self.what,
                strip_position(&error.to_string())
            ))
        })
    }

    /// A member parsed as a JSON value whose objects, at any depth, have no duplicate keys.
    pub(super) fn optional_unique(
        &self,
        name: &str,
        expected: &str,
    ) -> Result<Option<Value>, FrameError> {
        let raw = match self.members.raw_get(name) {
            None => return Ok(None),
            Some(MemberRef::Value(value)) => return Ok(Some(value.clone())),
            Some(MemberRef::Scanned(scalar)) => {
                return Ok(Some(
                    Value::deserialize(ScalarDeserializer(scalar)).map_err(|error| {
                        FrameError::invalid(format!("{}: `{name}`: {error}", self.what))
                    })?,
                ))
            }
            Some(MemberRef::Raw(raw)) => raw,
        };
        let parsed = serde_json::from_str::<UniqueValue>(raw.get());
        parsed.map(|unique| Some(unique.0)).map_err(|error| {
            let error = strip_position(&error.to_string());
            if error.starts_with("duplicate key") {
                FrameError::invalid(format!("{}: `{name}` has a {error}", self.what))
            } else {
                FrameError::invalid(format!(
                    "{}: `{name}` must be {expected} ({error})",
                    self.what
                ))
            }
        })
    }

    pub(super) fn required<T: Deserialize<'a>>(
        &self,
        name: &str,
        expected: &str,
    ) -> Result<T, FrameError> {
        self.optional(name, expected)?
            .ok_or_else(|| self.missing(name))
    }

    /// A required string, borrowed from the line when it has no escapes.
    pub(super) fn text(&self, name: &str, expected: &str) -> Result<Cow<'a, str>, FrameError> {
        Ok(self.required::<Text<'a>>(name, expected)?.0)
    }

    pub(super) fn missing(&self, name: &str) -> FrameError {
        FrameError::invalid(format!("{}: missing required `{name}`", self.what))
    }

    /// An optional member that, when present, must be a JSON object (serde would also build a
    /// struct from an array; `null` is refused).
    pub(super) fn object<T: DeserializeOwned>(
        &self,
        name: &str,
        expected: &str,
    ) -> Result<Option<T>, FrameError> {
        let Some(value) = self.optional_unique(name, expected)? else {
            return Ok(None);
        };
        if !value.is_object() {
            return Err(FrameError::invalid(format!(
                "{}: `{name}` must be {expected}, not {}",
                self.what,
                json_kind(&value)
            )));
        }
        T::deserialize(&value).map(Some).map_err(|error| {
            FrameError::invalid(format!(
                "{}: `{name}` must be {expected} ({})",
                self.what,
                strip_position(&error.to_string())
            ))
        })
    }

    pub(super) fn id(&self, name: &str) -> Result<String, FrameError> {
        self.text_id(name).map(Cow::into_owned)
    }

    /// A required non-empty string, borrowed from the line when it has no escapes.
    pub(super) fn text_id(&self, name: &str) -> Result<Cow<'a, str>, FrameError> {
        let value = self.text(name, "a non-empty string")?;
        self.non_empty(name, value)
    }

    pub(super) fn non_empty<S: AsRef<str>>(&self, name: &str, value: S) -> Result<S, FrameError> {
        if value.as_ref().is_empty() {
            Err(FrameError::invalid(format!(
                "{}: `{name}` must be a non-empty string",
                self.what
            )))
        } else {
            Ok(value)
        }
    }

    /// An optional member that may also be `null`; when a string, it must not be empty.
    pub(super) fn optional_non_empty(&self, name: &str) -> Result<Option<String>, FrameError> {
        match self.optional::<Option<String>>(name, "a non-empty string or null")? {
            Some(Some(value)) => self.non_empty(name, value).map(Some),
            _ => Ok(None),
        }
    }

    /// An optional member that, when present, must be a non-empty string (never `null`).
    pub(super) fn present_non_empty(&self, name: &str) -> Result<Option<String>, FrameError> {
        match self.optional::<String>(name, "a non-empty string (omitted, never null)")? {
            Some(value) => self.non_empty(name, value).map(Some),
            None => Ok(None),
        }
    }

    pub(super) fn count(&self, name: &str) -> Result<u64, FrameError> {
        Ok(self.required::<Count>(name, "a non-negative integer")?.0)
    }

    pub(super) fn optional_count(&self, name: &str) -> Result<Option<u64>, FrameError> {
        Ok(self
            .optional::<Count>(name, "a non-negative integer")?
            .map(|count| count.0))
    }
}

/// The largest count accepted: JavaScript's `Number.MAX_SAFE_INTEGER`, so a TypeScript host reads
/// every accepted count exactly.
pub const MAX_COUNT: u64 = (1 << 53) - 1;

/// A non-negative integer up to [`MAX_COUNT`]; like JSON Schema's `integer`, `3.0` counts as 3.
#[derive(Debug, Clone, Copy)]
pub(super) struct Count(pub(super) u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl Visitor<'_> for CountVisitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer up to 2^53-1")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Count, E> {
                if v <= MAX_COUNT {
                    Ok(Count(v))
                } else {
                    Err(E::invalid_value(de::Unexpected::Unsigned(v), &self))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Count, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Count, E> {
                if v.fract() == 0.0 && (0.0..=MAX_COUNT as f64).contains(&v) {
                    Ok(Count(v as u64))
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
        }
        deserializer.deserialize_any(CountVisitor)
    }
}

/// A `type` member: a string, borrowed from [`FRAME_TYPES`] or the command types when it is one of
/// them (no allocation on the hot path), owned otherwise.
pub(super) struct TypeName(pub(super) Cow<'static, str>);

impl<'de> Deserialize<'de> for TypeName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TypeVisitor;
        impl Visitor<'_> for TypeVisitor {
            type Value = TypeName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TypeName, E> {
                let known = FRAME_TYPES.iter().chain(&["execute", "cancel"]);
                Ok(TypeName(match known.into_iter().find(|name| **name == v) {
                    Some(name) => Cow::Borrowed(name),
                    None => Cow::Owned(v.to_string()),
                }))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<TypeName, E> {
                self.visit_str(&v)
            }
        }
        deserializer.deserialize_string(TypeVisitor)
    }
}
