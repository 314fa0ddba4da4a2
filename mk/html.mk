# SPDX-License-Identifier: MIT
# uPlot in the HTML report (owner: report; docs/report.md, "Interactive
# charts"). tools/html/embed.sh turns the uplot package that `npm ci` in
# tools/html installs (.ci/install-deps runs it where npm exists) into
# $(BUILD)/gen/uplot.c, linked into the kvtier tool. Without the package the
# same file carries no library and the report draws its static SVG charts
# only: make never runs npm and never needs the network.
UPLOT_DIR  := tools/html/node_modules/uplot
UPLOT_SRCS := $(wildcard $(UPLOT_DIR)/dist/uPlot.iife.min.js $(UPLOT_DIR)/dist/uPlot.min.css \
                         $(UPLOT_DIR)/LICENSE $(UPLOT_DIR)/package.json)
UPLOT_HAVE := $(if $(word 4,$(UPLOT_SRCS)),1,0)
UPLOT_GEN  := $(BUILD)/gen/uplot.c
UPLOT_OBJ  := $(BUILD)/obj/gen/uplot.o
# One line that changes when the package comes or goes, so that the
# generated source (and the tool, and test_report_html) follow it.
UPLOT_MODE := $(BUILD)/gen/uplot.mode
$(shell mkdir -p $(BUILD)/gen && { echo $(UPLOT_HAVE) | cmp -s - $(UPLOT_MODE) || \
	echo $(UPLOT_HAVE) > $(UPLOT_MODE); })

$(UPLOT_GEN): tools/html/embed.sh $(UPLOT_MODE) $(UPLOT_SRCS)
	sh tools/html/embed.sh $@ $(if $(filter 1,$(UPLOT_HAVE)),$(UPLOT_DIR))

$(UPLOT_OBJ): $(UPLOT_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

TOOL_OBJS += $(UPLOT_OBJ)

# The suites that read the HTML know which page to expect from the same make.
UPLOT_SUITES := $(BUILD)/tests/unit/test_report_html $(BUILD)/tests/unit/test_report \
                $(BUILD)/tests/unit/test_tier_report
$(UPLOT_SUITES): $(UPLOT_MODE)
$(UPLOT_SUITES): CPPFLAGS += -DKVT_HAVE_UPLOT=$(UPLOT_HAVE)
