// The conversation's view: one bubble per message, the figures of each turn under the reply.

import { formatBytes, previewElement } from './attachments.js';

export class MessageList {
    constructor(list, empty) {
        this.list = list;
        this.empty = empty;
    }

    clear() {
        this.list.replaceChildren();
        this.empty.hidden = false;
    }

    // A user bubble with its text and attachment previews.
    addUser({ text = '', attachments = [], voice = false }) {
        const bubble = this.add('user');
        if (voice) {
            bubble.element.classList.add('voice');
            bubble.setText('Speaking…');
        } else if (text) {
            bubble.setText(text);
        }
        if (attachments.length > 0) {
            const media = document.createElement('div');
            media.className = 'media';
            for (const attachment of attachments) {
                const figure = document.createElement('figure');
                figure.append(previewElement(attachment, { controls: true }));
                const caption = document.createElement('figcaption');
                caption.textContent = `${attachment.name} · ${formatBytes(attachment.size)}`;
                figure.append(caption);
                media.append(figure);
            }
            bubble.element.insertBefore(media, bubble.text);
        }
        return bubble;
    }

    // An assistant bubble, empty (a typing indicator) until text arrives.
    addAssistant() {
        const bubble = this.add('assistant');
        bubble.element.classList.add('pending');
        return bubble;
    }

    add(role) {
        this.empty.hidden = true;
        const element = document.createElement('li');
        element.className = `message ${role}`;
        const who = document.createElement('div');
        who.className = 'who';
        who.textContent = role === 'user' ? 'You' : 'Model';
        const text = document.createElement('div');
        text.className = 'text';
        const figures = document.createElement('div');
        figures.className = 'figures';
        element.append(who, text, figures);
        this.list.append(element);
        const bubble = {
            element,
            text,
            figures,
            setText: (value) => {
                text.textContent = value;
                if (value) element.classList.remove('pending');
                this.scroll();
            },
            appendText: (value) => bubble.setText(text.textContent + value),
            setError: (message) => {
                element.classList.remove('pending');
                element.classList.add('error');
                const line = document.createElement('div');
                line.className = 'error-text';
                line.textContent = message;
                element.insertBefore(line, figures);
                this.scroll();
            },
            // `turn`: the hook's turn record; shows what is known of it.
            setFigures: (turn) => {
                figures.replaceChildren(...figureChips(turn));
            },
        };
        this.scroll();
        return bubble;
    }

    scroll() {
        this.list.scrollTop = this.list.scrollHeight;
    }
}

function ms(value) {
    if (value == null) return '—';
    return value >= 10000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

function figureChips(turn) {
    const chips = [];
    const chip = (label, value, title, name) => {
        const element = document.createElement('span');
        element.className = 'chip';
        element.dataset.figure = name;
        element.title = title;
        const key = document.createElement('b');
        key.textContent = label;
        element.append(key, ` ${value}`);
        chips.push(element);
    };
    const from = turn.kind === 'voice' ? 'end of speech' : 'send';
    if (turn.text !== '' || turn.done) {
        chip('TTFT', ms(turn.ttftMs), `time to first token: from ${from} to the first text`, 'ttft');
    }
    if (turn.wantsAudio) {
        chip('TTFA', ms(turn.ttfaMs), `time to first audio: from ${from} to the first audio chunk`,
             'ttfa');
    }
    if (turn.usage) {
        chip('tokens', `${turn.usage.prompt_tokens ?? '?'} → ${turn.usage.completion_tokens ?? '?'}`,
             'prompt tokens → completion tokens', 'tokens');
    }
    if (turn.audioBytes > 0) {
        chip('audio', `${(turn.audioBytes / 2 / 24000).toFixed(1)} s`, 'speech received', 'audio');
    }
    if (turn.done && turn.totalMs != null) chip('total', ms(turn.totalMs), 'whole turn', 'total');
    return chips;
}
