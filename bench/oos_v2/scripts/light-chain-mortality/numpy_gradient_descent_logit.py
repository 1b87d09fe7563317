# idiom: numpy-only logistic regression trained by batch gradient descent with an L2 term on six standardised columns, missing creatinine filled with the train median; intended: valid
import numpy as np
import pandas as pd

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

median_creatinine = train["creatinine"].median()


def design(df):
    return np.column_stack([
        df["age"].to_numpy(dtype=float),
        (df["sex"] == "M").to_numpy(dtype=float),
        np.log(df["kappa"].to_numpy(dtype=float)),
        np.log(df["lambda"].to_numpy(dtype=float)),
        df["creatinine"].fillna(median_creatinine).to_numpy(dtype=float),
        df["mgus"].to_numpy(dtype=float),
    ])


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


X = design(train)
X_test = design(test)
mu, sd = X.mean(axis=0), X.std(axis=0)
X = np.hstack([np.ones((len(X), 1)), (X - mu) / sd])
X_test = np.hstack([np.ones((len(X_test), 1)), (X_test - mu) / sd])
y = train["death"].to_numpy(dtype=float)

w = np.zeros(X.shape[1])
learning_rate, l2 = 0.5, 1e-3
for step in range(2000):
    p = sigmoid(X @ w)
    grad = X.T @ (p - y) / len(y) + l2 * np.r_[0.0, w[1:]]
    w -= learning_rate * grad
    if step % 500 == 0:
        loss = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
        print(f"step {step}: train log loss {loss:.4f}")

print("weights (intercept first):", np.round(w, 3))
pred = sigmoid(X_test @ w)
pd.DataFrame({"id": test["id"], "death": pred}).to_csv("submission.csv", index=False)
