"""What the dashboard adds to Gradio's page: the Watch tab's script and the element ids it shares with
the tabs, the script that throttles redraws before Gradio loads, and plotly.js served by the dashboard."""
