package cli

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/symmem/symmem/internal/report"
)

// helpColumns is the width help text wraps to (report.Screen.HelpColumns): cobra's
// template functions are global, so the width they read is too.
var helpColumns atomic.Int64

func init() {
	helpColumns.Store(report.HelpWidth)
	cobra.AddTemplateFuncs(map[string]any{
		"wrapHelp":     func(s string) string { return report.WrapHelp(s, int(helpColumns.Load())) },
		"wrapExamples": func(s string) string { return report.WrapExamples(s, int(helpColumns.Load())) },
		"flagUsages": func(fs *pflag.FlagSet) string {
			return strings.TrimRight(fs.FlagUsagesWrapped(int(helpColumns.Load())), " \n")
		},
		"commandLine": func(name string, pad int, short string) string {
			return report.WrapIndent(fmt.Sprintf("  %-*s %s", pad, name, short), int(helpColumns.Load()), strings.Repeat(" ", pad+1))
		},
	})
}

// wrapHelp makes root's help and usage text (and every command's under it) wrap to
// width: cobra's own templates with each paragraph wrapped once from its source
// lines, usage lines and examples as shell commands (broken with " \\" before a flag),
// flags' usages as pflag wraps them (under the usage column).
func wrapHelp(root *cobra.Command, width int) {
	helpColumns.Store(int64(width))
	root.SetHelpTemplate(helpTemplate)
	root.SetUsageTemplate(usageTemplate)
}

const helpTemplate = `{{with (or .Long .Short)}}{{wrapHelp . | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}`

const usageTemplate = `Usage:{{if .Runnable}}
{{wrapExamples (printf "  %s" .UseLine)}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{wrapExamples .Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
{{commandLine .Name .NamePadding .Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{flagUsages .LocalFlags}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{flagUsages .InheritedFlags}}{{end}}{{if .HasAvailableSubCommands}}

{{wrapHelp (printf "Use \"%s [command] --help\" for more information about a command." .CommandPath)}}{{end}}
`
