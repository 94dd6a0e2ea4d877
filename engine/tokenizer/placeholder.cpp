// Placeholder until this module's first source lands; delete it then.
