//! What the model is told of an agent's skills: a catalog of names and descriptions, and how
//! to use them. The instructions themselves come only through the `skill` tool.

use super::SkillSet;

/// The system messages a run gets for these skills: the `<available_skills>` catalog, sorted
/// by name, then how to use skills. None when there are no skills.
pub(crate) fn system_messages(skills: &SkillSet) -> Vec<String> {
    if skills.is_empty() {
        return Vec::new();
    }
    let mut catalog = String::from("<available_skills>\n");
    for skill in skills.iter() {
        catalog.push_str("  <skill>\n");
        for (tag, value) in [
            ("name", skill.name().to_owned()),
            ("description", skill.description().to_owned()),
            ("location", skill.location()),
            ("source", "local".to_owned()),
        ] {
            catalog.push_str(&format!("    <{tag}>{}</{tag}>\n", escape(&value)));
        }
        catalog.push_str("  </skill>\n");
    }
    catalog.push_str("</available_skills>");
    let usage = "IMPORTANT: skills are not tools, and are not called by their names. When a \
                 task matches a skill's description, first call the `skill` tool with the \
                 skill's name as `name`: it returns the skill's instructions and lists its \
                 files. Follow those instructions. Read a file of a skill with `skill_read` \
                 (`skillName` and `path`), and find passages across all skills with \
                 `skill_search`."
        .to_owned();
    vec![catalog, usage]
}

/// XML text escaping, so a description cannot close or forge a tag of the catalog.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::skill::create_skill;

    #[test]
    fn the_catalog_is_sorted_and_escaped() {
        let set = SkillSet::new([
            create_skill("zeta", "Last <b>&</b>", "z").build().unwrap(),
            create_skill("alpha", "First", "a").build().unwrap(),
        ])
        .unwrap();
        let messages = system_messages(&set);
        assert_eq!(messages.len(), 2);
        let catalog = &messages[0];
        assert!(catalog.starts_with("<available_skills>\n  <skill>\n    <name>alpha</name>"));
        assert!(catalog.find("alpha").unwrap() < catalog.find("zeta").unwrap());
        assert!(catalog.contains("<description>Last &lt;b&gt;&amp;&lt;/b&gt;</description>"));
        assert!(catalog.contains("<location>inline/zeta/SKILL.md</location>"));
        assert!(catalog.contains("<source>local</source>"));
        assert!(messages[1].contains("`skill` tool"));
        assert!(system_messages(&SkillSet::default()).is_empty());
    }
}
