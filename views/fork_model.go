package views

import "time"

// ForkPage is the "Re-run from here" form: a checkpoint of a task, its
// state field by field for the user to change, and where the fork starts.
type ForkPage struct {
	Page
	TaskID    string
	TaskTitle string
	Workflow  string
	// Steps are the checkpoints the task can be forked from.
	Steps []ForkStepOption
	// The chosen checkpoint.
	Step     int
	Reason   string
	LastNode string
	NextNode string
	Created  time.Time
	// WaitsOn names the interrupt the checkpoint rests on ("" for none):
	// the fork asks it again.
	WaitsOn string
	// Fields are the state's top-level fields, each editable.
	Fields []StateField
	// Patch is the optional raw JSON merge patch applied after the fields.
	Patch      string
	PatchError string
	Title      string
	TitleError string
	// FormError is a refusal of the whole form (a running task, a node
	// that is gone).
	FormError string
	// Blocked says why no fork can be made now (the form is not offered).
	Blocked string
	CSRF    string
}

// ForkStepOption is one checkpoint in the step picker.
type ForkStepOption struct {
	Step     int
	Label    string
	Selected bool
}

// StateField is one top-level field of a state: text as text, anything
// else as JSON.
type StateField struct {
	Key   string
	Value string
	JSON  bool
	Rows  int
	Error string
}

// TaskLineage is what the task page says about where the task came from
// and what came from it, and whether its workflow's definition changed.
type TaskLineage struct {
	ForkedFrom *ForkLink
	Forks      []ForkLink
	// Definition is set when the task was stored under another definition
	// of its workflow than the running one.
	Definition *DefinitionNote
}

// ForkLink is a link to a task of a fork relation.
type ForkLink struct {
	ID     string
	Title  string
	Status string
	Step   int
}

// DefinitionNote is the banner of a task whose workflow definition
// changed.
type DefinitionNote struct {
	Stored, Running string
	// Blocked says why the task cannot resume ("" when it can).
	Blocked string
}
